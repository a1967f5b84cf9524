"""CNI ADD results: parse any spec version into the 1.x shape and render it for a caller's version.

Everything here is pure. The internal form is the 1.1.0 JSON shape (interfaces, ips, routes,
dns) with the version kept alongside, so conversion in either direction is one hop.
"""

from __future__ import annotations

from cni_shim import reasons
from cni_shim.core import versions
from cni_shim.errors import DECODE_FAILURE, CniError

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]


_LEGACY = ("0.1.0", "0.2.0")
_V04 = ("0.3.0", "0.3.1", "0.4.0")
_INTERFACE_KEYS_V04 = ("name", "mac", "sandbox")
_ROUTE_KEYS_V04 = ("dst", "gw")
_DIGITS = frozenset("0123456789")


def _decimal(text: str, most: int) -> bool:
    """ASCII digits without a leading zero, at most `most` (ipaddress refuses leading zeros too)."""
    return (
        0 < len(text) <= 3
        and _DIGITS.issuperset(text)
        and (text == "0" or text[0] != "0")
        and int(text) <= most
    )


def _plain_v4(address: str) -> bool:
    """A subset of what ipaddress.ip_interface takes as IPv4: dotted decimal, an optional prefix
    length 0-32. Spelled out, not a regular expression: a thin invocation loads no `re`."""
    host, slash, prefix = address.partition("/")
    octets = host.split(".")
    return len(octets) == 4 and all(_decimal(o, 255) for o in octets) and (not slash or _decimal(prefix, 32))


def _bad(message: str) -> CniError:
    return CniError(reasons.INVALID_RESULT, message, DECODE_FAILURE)


def _family(address: str) -> int:
    if _plain_v4(address):
        return 4  # what plugins answer; ipaddress costs microseconds per address on every ADD and DEL
    import ipaddress  # noqa: PLC0415 - only addresses and routes need it, not every start

    try:
        return ipaddress.ip_interface(address).version
    except ValueError as exc:
        raise _bad(f"result IP address {address!r} is not a CIDR: {exc}") from exc


def to_current(result: Any, default_version: str) -> Json:
    """Normalise a result of any version to the 1.1.0 shape; a missing cniVersion means the request's."""
    if not isinstance(result, dict):
        raise _bad(f"a CNI result must be a JSON object, got {type(result).__name__}")
    version = result.get("cniVersion") or default_version or "0.1.0"
    if not isinstance(version, str):
        raise _bad("result cniVersion must be a string")
    versions.require_supported(version)
    if version in _LEGACY:
        return _from_legacy(result)
    out: Json = {"cniVersion": versions.CURRENT}
    for key in ("interfaces", "routes"):
        value = result.get(key)
        if value is not None:
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise _bad(f"result {key} must be a list of objects")
            out[key] = [dict(v) for v in value]
    ips = result.get("ips")
    if ips is not None:
        if not isinstance(ips, list) or not all(isinstance(v, dict) for v in ips):
            raise _bad("result ips must be a list of objects")
        out["ips"] = [{k: v for k, v in ip.items() if k != "version"} for ip in ips]
        for ip in out["ips"]:
            _family(str(ip.get("address", "")))
    if isinstance(result.get("dns"), dict) and result["dns"]:
        out["dns"] = dict(result["dns"])
    return out


def _from_legacy(result: Json) -> Json:
    out: Json = {"cniVersion": versions.CURRENT}
    ips: list[Json] = []
    routes: list[Json] = []
    for key in ("ip4", "ip6"):
        block = result.get(key)
        if not isinstance(block, dict):
            continue
        ip: Json = {"address": block.get("ip", "")}
        if block.get("gateway"):
            ip["gateway"] = block["gateway"]
        _family(str(ip["address"]))
        ips.append(ip)
        routes.extend(dict(r) for r in block.get("routes") or [] if isinstance(r, dict))
    if ips:
        out["ips"] = ips
    if routes:
        out["routes"] = routes
    if isinstance(result.get("dns"), dict) and result["dns"]:
        out["dns"] = dict(result["dns"])
    return out


def convert(current: Json, version: str) -> Json:
    """Render a 1.1.0-shaped result for `version` (the caller's or a chained plugin's)."""
    target = versions.require_supported(version)
    if target in _LEGACY:
        return _to_legacy(current, target)
    out: Json = {"cniVersion": target}
    if target in _V04:
        if current.get("interfaces"):
            out["interfaces"] = [
                {k: v for k, v in i.items() if k in _INTERFACE_KEYS_V04} for i in current["interfaces"]
            ]
        if current.get("ips"):
            out["ips"] = [{"version": str(_family(str(ip["address"]))), **ip} for ip in current["ips"]]
        if current.get("routes"):
            out["routes"] = [{k: v for k, v in r.items() if k in _ROUTE_KEYS_V04} for r in current["routes"]]
    else:
        for key in ("interfaces", "ips", "routes"):
            if current.get(key):
                out[key] = current[key]
    if current.get("dns"):
        out["dns"] = current["dns"]
    return out


def _to_legacy(current: Json, target: str) -> Json:
    out: Json = {"cniVersion": target}
    for family, key in ((4, "ip4"), (6, "ip6")):
        first = next((ip for ip in current.get("ips", []) if _family(str(ip["address"])) == family), None)
        if first is None:
            continue
        block: Json = {"ip": first["address"]}
        if first.get("gateway"):
            block["gateway"] = first["gateway"]
        routes = [
            {k: v for k, v in r.items() if k in _ROUTE_KEYS_V04}
            for r in current.get("routes", [])
            if _route_family(r) == family
        ]
        if routes:
            block["routes"] = routes
        out[key] = block
    if "ip4" not in out and "ip6" not in out:
        raise CniError(
            reasons.RESULT_NOT_CONVERTIBLE,
            f"cannot convert the result to cniVersion {target}: it has no IP addresses",
            DECODE_FAILURE,
        )
    if current.get("dns"):
        out["dns"] = current["dns"]
    return out


def _route_family(route: Json) -> int:
    import ipaddress  # noqa: PLC0415 - only addresses and routes need it, not every start

    try:
        return ipaddress.ip_network(str(route.get("dst", "")), strict=False).version
    except ValueError:
        return 0


def is_default_route(route: Json) -> bool:
    """A route to 0.0.0.0/0 or ::/0 however it is spelled (Multus compares strings; we compare networks)."""
    import ipaddress  # noqa: PLC0415 - only addresses and routes need it, not every start

    try:
        return ipaddress.ip_network(str(route.get("dst", "")), strict=False).prefixlen == 0
    except ValueError:
        return False


def placeholder(ifname: str, netns: str) -> Json:
    """Multus's success result for a Pod that no longer exists: nothing was attached."""
    return {
        "cniVersion": versions.CURRENT,
        "interfaces": [{"name": ifname, "sandbox": netns}],
        "ips": [{"address": "0.0.0.0/0", "gateway": "0.0.0.0"}],  # noqa: S104 - an address, not a bind
    }
