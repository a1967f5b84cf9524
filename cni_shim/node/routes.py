"""The route adapter: replace an interface's default routes inside a Pod netns with `ip` via nsenter.

Only Pods whose selections carry `default-route` reach this, so it runs the iproute2 tools
rather than loading a netlink library into every CNI start.
"""

from __future__ import annotations

from collections.abc import Sequence

from cni_shim import reasons
from cni_shim.errors import CniError

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    import subprocess


def _ip(netns: str, *args: str) -> subprocess.CompletedProcess[str]:
    import subprocess  # noqa: PLC0415 - only Pods asking for default-route pay for it

    return subprocess.run(
        ["nsenter", f"--net={netns}", "ip", *args], capture_output=True, text=True, check=False, timeout=10
    )


class IpRoutes:
    """Multus's DeleteDefaultGW then SetDefaultGW, with their failure behaviour: deleting never
    fails on a missing interface (netlink's lookup by a missing name lists the whole netns, so
    every default route there goes), adding a gateway on one fails with netlink's text."""

    def replace_defaults(self, netns: str, ifname: str, gateways: Sequence[str]) -> None:
        link_missing = False
        for family, default in (("-4", "0.0.0.0/0"), ("-6", "::/0")):
            scope = [] if link_missing else ["dev", ifname]
            out = _ip(netns, family, "route", "flush", "exact", default, *scope)
            if out.returncode != 0 and not link_missing and "Cannot find device" in out.stderr:
                link_missing = True
                out = _ip(netns, family, "route", "flush", "exact", default)
            # A netns without any route of the family has no table to flush: nothing to delete.
            if out.returncode != 0 and "FIB table does not exist" not in out.stderr:
                raise CniError(
                    reasons.DEFAULT_ROUTE_FAILED, f"error deleting default gateway: {out.stderr.strip()}"
                )
        if gateways and link_missing:
            raise CniError(
                reasons.DEFAULT_ROUTE_FAILED,
                "error setting default gateway: SetDefaultGW: Error getting link Link not found",
            )
        for gw in gateways:
            family = "-6" if ":" in gw else "-4"
            out = _ip(netns, family, "route", "add", "default", "via", gw, "dev", ifname)
            if out.returncode != 0 and "File exists" not in out.stderr:
                raise CniError(
                    reasons.DEFAULT_ROUTE_FAILED, f"error setting default gateway: {out.stderr.strip()}"
                )
