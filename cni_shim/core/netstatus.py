"""The k8s.v1.cni.cncf.io/network-status annotation in Multus's exact shape and serialization."""

from __future__ import annotations

from collections.abc import Sequence

from sriov_lib import quickjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]


def _is_default(route: Json) -> bool:
    import ipaddress  # noqa: PLC0415 - only addresses and routes need it, not every start

    dst = str(route.get("dst", ""))
    if not dst or dst in ("0.0.0.0/0", "::/0"):
        return True
    try:
        return ipaddress.ip_network(dst, strict=False).network_address.is_unspecified
    except ValueError:
        return False


def pci_device_info(pci_address: str, pf_pci_address: str = "", rdma_device: str = "") -> Json:
    """Multus's `device-info` for a PCI device (the DeviceInfo of the NAD client, version 1.1.0),
    as network-status and a CNIDeviceInfoFile hold it; empty members are left out, as Go's
    omitempty leaves them out."""
    pci: Json = {"pci-address": pci_address}
    if rdma_device:
        pci["rdma-device"] = rdma_device
    if pf_pci_address:
        pci["pf-pci-address"] = pf_pci_address
    return {"type": "pci", "version": "1.1.0", "pci": pci}


# The NAD client's DeviceInfo: each part with its keys, in the order its JSON writes them.
_DEVICE_INFO_PARTS: dict[str, tuple[str, ...]] = {
    "pci": ("pci-address", "vhost-net", "rdma-device", "pf-pci-address", "representor-device"),
    "vdpa": ("parent-device", "driver", "path", "pci-address", "pf-pci-address", "representor-device"),
    "vhost-user": ("mode", "path"),
    "memif": ("role", "path", "mode"),
}


def _fields(obj: Any, names: tuple[str, ...]) -> Json:
    """Go's decode of a struct of strings (keys matched case-folded, empty ones omitted)."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ValueError("not an object")
    folded: Json = {str(k).lower(): v for k, v in obj.items()}
    out: Json = {}
    for name in names:
        value = folded.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{name} is not a string")
        if value:
            out[name] = value
    return out


def load_device_info(data: bytes) -> Json | None:
    """A device-info file (a device plugin's or a CNI's) as Multus reads it into network-status;
    None when it is not one (Multus then leaves device-info out)."""
    try:
        doc = quickjson.loads(data)
        info = _fields(doc, ("type", "version"))
        folded = {str(k).lower(): v for k, v in doc.items()}
        for part, names in _DEVICE_INFO_PARTS.items():
            if folded.get(part) is not None:
                info[part] = _fields(folded[part], names)
    except (ValueError, RecursionError, AttributeError):
        return None
    return info


def _entry(
    name: str,
    iface: Json | None,
    ips: list[str],
    gateways: list[str],
    dns: Json,
    *,
    default: bool,
    device_info: Json | None = None,
) -> Json:
    entry: Json = {"name": name}
    if iface is not None:
        entry["interface"] = iface.get("name", "")
    if ips:
        entry["ips"] = ips
    if iface is not None and iface.get("mac"):
        entry["mac"] = iface["mac"]
    if iface is not None and iface.get("mtu"):
        entry["mtu"] = iface["mtu"]
    if default:
        entry["default"] = True
    entry["dns"] = dns
    if device_info is not None:
        entry["device-info"] = device_info
    if gateways:
        entry["gateway"] = gateways
    return entry


def statuses(result: Json, delegate_name: str, master: bool, device_info: Json | None = None) -> list[Json]:
    """NAD-client CreateNetworkStatuses for one delegate's 1.x result (`device_info` on each entry)."""
    interfaces: list[Json] = result.get("interfaces") or []
    ips: list[Json] = result.get("ips") or []
    gateways = [str(r["gw"]) for r in result.get("routes") or [] if r.get("gw") and _is_default(r)]
    dns: Json = dict(result.get("dns") or {})

    def bare(ip: Json) -> str:
        return str(ip.get("address", "")).split("/")[0]

    if len(interfaces) == 1:
        iface = interfaces[0] if interfaces[0].get("sandbox") else None
        return [
            _entry(
                delegate_name,
                iface,
                [bare(ip) for ip in ips],
                gateways,
                dns,
                default=master,
                device_info=device_info,
            )
        ]
    sandboxed = [i for i, iface in enumerate(interfaces) if iface.get("sandbox")]
    if not sandboxed:
        return []
    per_iface: dict[int, list[str]] = {i: [] for i in sandboxed}
    for ip in ips:
        index = ip.get("interface")
        if isinstance(index, int):
            if index in per_iface:
                per_iface[index].append(bare(ip))
        else:
            per_iface[sandboxed[-1]].append(bare(ip))
    default_index: int | None = None
    if master:
        with_gw = next((ip for ip in ips if ip.get("gateway") and isinstance(ip.get("interface"), int)), None)
        default_index = with_gw["interface"] if with_gw is not None else sandboxed[0]
    return [
        _entry(
            delegate_name,
            interfaces[i],
            per_iface[i],
            gateways,
            dns,
            default=i == default_index,
            device_info=device_info,
        )
        for i in sandboxed
    ]


def render(entries: Sequence[Json]) -> str:
    """Go's per-entry MarshalIndent joined into one list, as Multus writes it."""
    return "[" + ",".join(quickjson.dumps(e, indent=4) for e in entries) + "]"
