"""This driver's entries in a ResourceClaim's `status.devices` (spec 6.4: diagnostics only,
nothing on the CNI path reads them).

The list is a map keyed by (driver, pool, device, shareID) that every driver of the claim shares:
a merge changes only the entries this driver names and keeps every other entry exactly as read,
in its place, so re-reporting the same state yields the identical list and costs no write.
Nothing on the CNI path reads these entries; connectivity never depends on them.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sriov_dra.core.errors import fail
from sriov_dra.reasons import DEVICE_STATUS_TOO_LARGE

READY: Final = "Ready"
# API validation limits of AllocatedDeviceStatus and NetworkDeviceData (resource.k8s.io/v1).
DATA_LIMIT: Final = 10 * 1024
MAX_IPS: Final = 16
MAX_INTERFACE_NAME: Final = 256
MAX_HARDWARE_ADDRESS: Final = 128

StatusKey = tuple[str, str, str, str]


def status_key(entry: Mapping[str, Any]) -> StatusKey:
    """The list-map key; an absent shareID and an empty one are the same device."""
    return (
        str(entry.get("driver") or ""),
        str(entry.get("pool") or ""),
        str(entry.get("device") or ""),
        str(entry.get("shareID") or ""),
    )


@dataclass(frozen=True)
class DeviceReport:
    """What the driver says about one prepared device: a small JSON object and why it is Ready."""

    driver: str
    pool: str
    device: str
    data: Mapping[str, Any]
    reason: str
    message: str
    network: Mapping[str, Any] | None = None
    """NetworkDeviceData, when the interface's addresses are known."""


def desired_entry(report: DeviceReport, *, generation: int, now: str) -> dict[str, Any]:
    """The status entry for `report`, with a Ready condition observed at the claim's `generation`
    (0 when the claim has none)."""
    size = len(json.dumps(report.data, separators=(",", ":")).encode())
    if size > DATA_LIMIT:
        raise fail(
            DEVICE_STATUS_TOO_LARGE,
            f"status data of device {report.pool}/{report.device} is {size} bytes, over the API's "
            f"{DATA_LIMIT}-byte limit; the device status is not reported",
        )
    entry: dict[str, Any] = {
        "driver": report.driver,
        "pool": report.pool,
        "device": report.device,
        "data": dict(report.data),
        "conditions": [
            {
                "type": READY,
                "status": "True",
                "reason": report.reason,
                "message": report.message,
                "lastTransitionTime": now,
            }
        ],
    }
    if generation > 0:
        # The API omits a zero observedGeneration; sending one would never read back equal.
        entry["conditions"][0]["observedGeneration"] = generation
    if report.network:
        entry["networkData"] = dict(report.network)
    return entry


def merge_device_status(
    current: Sequence[Mapping[str, Any]], desired: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`current` with each `desired` entry upserted by key; other entries stay as they are.

    An upsert replaces `data` and the conditions it names, keeping a condition's transition time
    while its status is unchanged and any networkData already reported, so the result equals
    `current` whenever nothing really changed.
    """
    pending = {status_key(d): d for d in desired}
    out: list[dict[str, Any]] = []
    for entry in current:
        new = pending.pop(status_key(entry), None)
        out.append(dict(entry) if new is None else _upserted(entry, new))
    out += [dict(d) for d in desired if status_key(d) in pending]
    return out


def remove_device_status(
    current: Sequence[Mapping[str, Any]], keys: Collection[StatusKey]
) -> list[dict[str, Any]]:
    """`current` without the entries whose key is in `keys`."""
    return [dict(e) for e in current if status_key(e) not in keys]


def _upserted(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(old)
    merged["data"] = new["data"]
    merged["conditions"] = _merged_conditions(old.get("conditions") or [], new.get("conditions") or [])
    if "networkData" in new:
        merged["networkData"] = new["networkData"]
    return merged


def _merged_conditions(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    by_type = {str(c.get("type")): c for c in new}
    out: list[dict[str, Any]] = []
    for cond in old:
        update = by_type.pop(str(cond.get("type")), None)
        if update is None:
            out.append(dict(cond))
            continue
        replaced = dict(update)
        if cond.get("status") == update.get("status") and cond.get("lastTransitionTime"):
            replaced["lastTransitionTime"] = cond["lastTransitionTime"]
        out.append(replaced)
    out += [dict(c) for c in new if str(c.get("type")) in by_type]
    return out


def network_data(network_status: str, name: str) -> dict[str, Any] | None:
    """NetworkDeviceData from the Pod's network-status annotation entry named `name` ("ns/nad").

    Multus-format entries list addresses without a prefix length, so each becomes a host prefix
    (/32, /128): the API requires CIDR strings, and the address itself is what users look for.
    None when the annotation has no such entry (CNI ADD has not finished) or cannot be read.
    """
    try:
        entries = json.loads(network_status)
    except ValueError:
        return None
    if not isinstance(entries, list):
        return None
    entry = next((e for e in entries if isinstance(e, dict) and e.get("name") == name), None)
    if entry is None:
        return None
    out: dict[str, Any] = {}
    interface = entry.get("interface")
    if isinstance(interface, str) and interface and len(interface.encode()) <= MAX_INTERFACE_NAME:
        out["interfaceName"] = interface
    ips: list[str] = []
    for raw in entry.get("ips") or []:
        cidr = _host_cidr(raw)
        if cidr is not None and cidr not in ips:
            ips.append(cidr)
    if ips:
        out["ips"] = ips[:MAX_IPS]
    mac = entry.get("mac")
    if isinstance(mac, str) and mac and len(mac.encode()) <= MAX_HARDWARE_ADDRESS:
        out["hardwareAddress"] = mac
    return out


def _host_cidr(raw: object) -> str | None:
    if not isinstance(raw, str):
        return None
    try:
        if "/" in raw:
            return str(ipaddress.ip_interface(raw))
        address = ipaddress.ip_address(raw)
    except ValueError:
        return None
    return f"{address}/{address.max_prefixlen}"
