"""The device-plugin resourceName path (Multus's device lookup), pure.

A NAD annotated `k8s.v1.cni.cncf.io/resourceName` names a device-plugin resource; the kubelet
(its pod-resources API, or its checkpoint file where that socket is absent) says which device IDs
the Pod holds under each resource. One map per ADD; each resource keeps a cursor, so the k-th
delegate naming a resource gets its k-th device in sorted order (current Multus sorts; one map
per ADD is what it means to do where older releases rebuilt the map per default network). A
delegate finding no device left gets none, silently, as in Multus. The device goes into the
config as `deviceID` and `pciBusID` (cni_shim.core.delegates.with_device_id), and the device
plugin's device-info file is copied to the attachment's CNIDeviceInfoFile before its ADD.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

# Where device plugins leave a device's info (the SR-IOV network device plugin among them).
DEVICE_PLUGIN_DEVINFO_DIR = "/var/run/k8s.cni.cncf.io/devinfo/dp/"
# Multus's budget for the kubelet: 10 s for List, answers of up to 16 MiB.
LIST_TIMEOUT = 10.0
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def merge(allocations: Iterable[tuple[str, Iterable[str]]]) -> dict[str, tuple[str, ...]]:
    """(resource, device IDs) pairs of every container of the Pod -> each resource's sorted IDs."""
    out: dict[str, list[str]] = {}
    for resource, ids in allocations:
        out.setdefault(resource, []).extend(ids)
    return {resource: tuple(sorted(ids)) for resource, ids in out.items()}


class Cursor:
    """One ADD's resource map: each resource hands out its devices in turn."""

    def __init__(self, resources: Mapping[str, Sequence[str]]) -> None:
        self._resources = resources
        self._used: dict[str, int] = {}

    def take(self, resource_name: str) -> str:
        """The resource's next device, "" when none is left (or the Pod holds none)."""
        ids = self._resources.get(resource_name, ())
        index = self._used.get(resource_name, 0)
        if index >= len(ids):
            return ""
        self._used[resource_name] = index + 1
        return ids[index]


def device_info_source(resource_name: str, device_id: str) -> str:
    """The device plugin's device-info file for a device (`/` in either part becomes `-`)."""
    return DEVICE_PLUGIN_DEVINFO_DIR + (
        f"{resource_name.replace('/', '-')}-{device_id.replace('/', '-')}-device.json"
    )
