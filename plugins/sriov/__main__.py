"""Entry point: ``python -m plugins.sriov``. VERSION and input errors never load pyroute2."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plugins import skel


def _add(args: skel.CmdArgs) -> Mapping[str, Any]:
    from plugins.sriov.commands import cmd_add, setup_logging  # noqa: PLC0415 - keep start-up lean
    from plugins.sriov.netlink import Netlink  # noqa: PLC0415

    setup_logging(args.conf)
    return cmd_add(args, Netlink())


def _del(args: skel.CmdArgs) -> None:
    from plugins.sriov.commands import cmd_del, setup_logging  # noqa: PLC0415
    from plugins.sriov.netlink import Netlink  # noqa: PLC0415

    setup_logging(args.conf)
    cmd_del(args, Netlink())


def _check(args: skel.CmdArgs) -> None:
    # sriov-cni's CHECK is a no-op that always succeeds.
    return None


def main() -> None:
    skel.main({"ADD": _add, "DEL": _del, "CHECK": _check})


if __name__ == "__main__":
    main()
