"""The kubelet's device-plugin checkpoint (`kubelet_internal_checkpoint`): what it allocated to a Pod.

This is "the allocation" on the legacy resourceName path: the file the kubelet's device manager
keeps under its device-plugins directory and that Multus read before the pod-resources API
(which needs gRPC, too heavy for a CNI executable). Its shape:
`{"Data": {"PodDeviceEntries": [{"PodUID", "ContainerName", "ResourceName", "DeviceIDs"}, ...],
"RegisteredDevices": {...}}, "Checksum": N}`, where DeviceIDs maps a NUMA node to device IDs
(a plain list before Kubernetes 1.20). For an SR-IOV device plugin a device ID is the VF's PCI
address. Only root writes the file; its checksum is the kubelet's business, not ours.
"""

from __future__ import annotations

from sriov_lib import quickjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any


def _device_ids(value: Any) -> list[str]:
    groups = value.values() if isinstance(value, dict) else [value]
    return [d for group in groups if isinstance(group, list) for d in group if isinstance(d, str)]


def _entries(data: bytes) -> list[Any]:
    """The checkpoint's PodDeviceEntries; ValueError when the document is not one."""
    try:
        doc = quickjson.loads(data)
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    data_part = doc.get("Data") if isinstance(doc, dict) else None
    entries = data_part.get("PodDeviceEntries") if isinstance(data_part, dict) else []
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ValueError("Data.PodDeviceEntries is not a list")
    return entries


def resource_map(data: bytes, pod_uid: str) -> dict[str, list[str]]:
    """Every resource the checkpoint allocates to `pod_uid` (any container), with its device IDs in
    the checkpoint's order (Multus's checkpoint resource client). ValueError: not a checkpoint."""
    out: dict[str, list[str]] = {}
    for e in _entries(data):
        if isinstance(e, dict) and e.get("PodUID") == pod_uid and isinstance(e.get("ResourceName"), str):
            out.setdefault(e["ResourceName"], []).extend(_device_ids(e.get("DeviceIDs")))
    return out


def allocated(data: bytes, pod_uid: str, resource_name: str) -> frozenset[str]:
    """The device IDs the checkpoint allocates to `pod_uid` (any container) under `resource_name`.

    An unreadable document allocates nothing: a refusal is the safe answer."""
    if not pod_uid or not resource_name:
        return frozenset()
    try:
        return frozenset(resource_map(data, pod_uid).get(resource_name, ()))
    except ValueError:
        return frozenset()
