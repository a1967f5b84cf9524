"""CNI result conversion between spec families (0.1/0.2, 0.3/0.4, 1.x), stdlib only.

Plugins work on the 1.x shape internally and convert once, at the edge, to the requested version.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from plugins.skel import INCOMPATIBLE_VERSION, CniError, version_tuple

CURRENT = "1.0.0"
# 1.1.0 fields that older families cannot carry (SPEC.md 1.1.0 additions).
_NEW_INTERFACE_KEYS = ("mtu", "socketPath", "pciID")


def _family(address: str) -> str:
    return "4" if ipaddress.ip_interface(address).version == 4 else "6"


def to_current(result: Mapping[str, Any], version: str | None = None) -> dict[str, Any]:
    """Bring a result of any family (``version`` defaults to its own cniVersion) to the 1.x shape."""
    ver = version_tuple(version or str(result.get("cniVersion", "")))
    if ver >= (1, 0, 0):
        return {k: v for k, v in result.items() if k != "cniVersion"}
    if ver >= (0, 3, 0):
        out = {k: v for k, v in result.items() if k != "cniVersion"}
        out["ips"] = [{k: v for k, v in ip.items() if k != "version"} for ip in result.get("ips", [])]
        return out
    ips: list[dict[str, Any]] = []
    routes: list[Any] = []
    for key in ("ip4", "ip6"):
        legacy = result.get(key)
        if legacy:
            ip = {"address": legacy["ip"]}
            if legacy.get("gateway"):
                ip["gateway"] = legacy["gateway"]
            ips.append(ip)
            routes.extend(legacy.get("routes", []))
    out = {"ips": ips, "routes": routes}
    if result.get("dns"):
        out["dns"] = result["dns"]
    return out


def from_current(result: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Express a 1.x-shaped result in the family of ``version``."""
    ver = version_tuple(version)
    if ver >= (1, 0, 0):
        return {"cniVersion": version, **{k: v for k, v in result.items() if k != "cniVersion"}}
    if ver >= (0, 3, 0):
        out: dict[str, Any] = {"cniVersion": version}
        out.update({k: v for k, v in result.items() if k not in ("cniVersion", "ips", "interfaces")})
        if "interfaces" in result:
            out["interfaces"] = [
                {k: v for k, v in iface.items() if k not in _NEW_INTERFACE_KEYS}
                for iface in result["interfaces"]
            ]
        out["ips"] = [{**ip, "version": _family(ip["address"])} for ip in result.get("ips", [])]
        return out
    legacy: dict[str, Any] = {"cniVersion": version}
    for ip in result.get("ips", []):
        key = "ip" + _family(ip["address"])
        if key in legacy:
            continue
        entry: dict[str, Any] = {"ip": ip["address"]}
        if ip.get("gateway"):
            entry["gateway"] = ip["gateway"]
        family_routes = [r for r in result.get("routes", []) if _family(r["dst"]) == key[-1]]
        if family_routes:
            entry["routes"] = family_routes
        legacy[key] = entry
    if "ip4" not in legacy and "ip6" not in legacy:
        raise CniError(INCOMPATIBLE_VERSION, "cannot convert: no valid IP addresses")
    if result.get("dns"):
        legacy["dns"] = result["dns"]
    return legacy


def passthrough(conf: Mapping[str, Any], ifname: str, netns: str) -> dict[str, Any]:
    """What a test plugin reports on a successful ADD: the prevResult unchanged, else one interface."""
    version = str(conf.get("cniVersion") or "0.1.0")
    prev = conf.get("prevResult")
    if isinstance(prev, Mapping):
        return {**prev, "cniVersion": version}
    return {"cniVersion": version, "interfaces": [{"name": ifname, "sandbox": netns}], "ips": []}
