"""The route adapter: replace an interface's default routes inside a Pod netns with `ip` via nsenter.

Only Pods whose selections carry `default-route` reach this, so it runs the iproute2 tools
rather than loading a netlink library into every CNI start.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cni_shim import reasons
from cni_shim.errors import CniError

if TYPE_CHECKING:
    import subprocess


def _ip(netns: str, *args: str) -> subprocess.CompletedProcess[str]:
    import subprocess  # noqa: PLC0415 - only Pods asking for default-route pay for it

    return subprocess.run(
        ["nsenter", f"--net={netns}", "ip", *args], capture_output=True, text=True, check=False, timeout=10
    )


class IpRoutes:
    def replace_defaults(self, netns: str, ifname: str, gateways: Sequence[str]) -> None:
        for family, default in (("-4", "0.0.0.0/0"), ("-6", "::/0")):
            out = _ip(netns, family, "route", "flush", "exact", default, "dev", ifname)
            if out.returncode != 0:
                raise CniError(
                    reasons.DEFAULT_ROUTE_FAILED,
                    f"error deleting default gateway on {ifname}: {out.stderr.strip()}",
                )
        for gw in gateways:
            family = "-6" if ":" in gw else "-4"
            out = _ip(netns, family, "route", "add", "default", "via", gw, "dev", ifname)
            if out.returncode != 0 and "File exists" not in out.stderr:
                raise CniError(
                    reasons.DEFAULT_ROUTE_FAILED,
                    f"error setting default gateway {gw} on {ifname}: {out.stderr.strip()}",
                )
