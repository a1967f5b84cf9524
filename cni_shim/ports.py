"""The small interfaces the CNI core is written against; thin and thick modes plug in adapters."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


class Executor(Protocol):
    """Runs one CNI plugin binary with the exec protocol; raises CniError on a failed plugin."""

    def execute(
        self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes
    ) -> bytes: ...


class Fanout(Protocol):
    """Runs tasks at once, at most `limit` at a time; each answer (a value or the exception it
    raised) at its task's index (sriov_lib.fanout.run)."""

    def __call__(self, tasks: Sequence[Callable[[], T]], limit: int) -> list[T | BaseException]: ...


class CacheStore(Protocol):
    """Durable per-container delegate plans and per-attachment delegate results."""

    def save_plan(self, container_id: str, data: bytes) -> None: ...

    def load_plan(self, container_id: str) -> bytes | None: ...

    def remove_plan(self, container_id: str) -> None: ...

    def plan_ids(self) -> list[str]: ...

    def save_result(self, key: str, data: bytes) -> None: ...

    def load_result(self, key: str) -> bytes | None: ...

    def remove_result(self, key: str) -> None: ...


class KubeApi(Protocol):
    """Live reads and the one status write the shim makes. None means NotFound."""

    # Whether get_pod answers straight from the API server, so a status write over that answer is
    # rarely stale (an informer-cache view says False: the network-status write re-reads instead).
    pod_reads_live: bool

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list_nads(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The NADs of `namespace` that `label_selector` selects, read live."""
        ...

    def replace_pod_status(self, pod: Mapping[str, Any]) -> None: ...


@runtime_checkable
class ManyNads(Protocol):
    """A KubeApi that can read several NADs at once (the daemon's live view); others read them in turn."""

    def get_nads(self, keys: Sequence[tuple[str, str]]) -> Iterator[dict[str, Any] | None]:
        """get_nad of each (namespace, name) in order; a failed read raises when its turn comes."""
        ...


class EventSink(Protocol):
    """Where an ADD's Pod Events go (core/v1 Event objects, cni_shim.core.podevents). Best effort:
    thin mode writes them beside the status write with a short timeout, the daemon after its
    reply; `publish` and `settle` may raise, and the core only logs that."""

    def publish(self, events: Sequence[Mapping[str, Any]]) -> None: ...

    def settle(self) -> None:
        """Wait (within the sink's own budget) for a write `publish` left running."""
        ...


class ConfFiles(Protocol):
    """CNI config files on the node (confDir, a clusterNetwork path) as they are on disk; each
    method raises OSError as the call it stands for does (listdir, isdir, a file read)."""

    def list_dir(self, directory: str) -> list[str]: ...

    def is_dir(self, path: str) -> bool: ...

    def read(self, path: str) -> bytes: ...


class NodeDevices(Protocol):
    """This node's devices as a delegate would find them (sysfs) and the kubelet's device-plugin
    allocations (its checkpoint); cni_shim.core.deviceaccess decides with the answers."""

    def virtual_function(self, kind: str, value: str) -> str | None:
        """The PCI address of the SR-IOV VF that `value` names (a cni_shim.core.deviceaccess kind:
        PCI address, netdev, MAC, sysfs path), None when it names no VF on this node."""
        ...

    def allocated(self, pod_uid: str, resource_name: str) -> frozenset[str]:
        """The device IDs the kubelet's device plugins allocated to the Pod under `resource_name`."""
        ...


class PodResources(Protocol):
    """What the kubelet's device plugins allocated to a Pod: its pod-resources API, or its
    device-plugin checkpoint where that socket is absent (Multus's resource client)."""

    def allocations(self, namespace: str, name: str, uid: str) -> list[tuple[str, list[str]]]:
        """(resource name, device IDs) of every container of the Pod, in the kubelet's order;
        raises CniError (Multus's wording) when neither source can be read."""
        ...


class DeviceInfoFiles(Protocol):
    """Device-info files under /var/run/k8s.cni.cncf.io/devinfo: a device plugin's, and Multus's
    CNIDeviceInfoFile of an attachment."""

    def read(self, path: str) -> bytes | None:
        """The file's bytes, None when it cannot be read."""
        ...

    def write(self, path: str, data: bytes) -> None:
        """Create or replace the file whole (idempotent: a retried ADD writes the same bytes)."""

    def remove(self, path: str) -> None:
        """Remove the file; a missing file is not an error."""


class Routes(Protocol):
    """Default routes inside a Pod network namespace (Multus default-route handling)."""

    def replace_defaults(self, netns: str, ifname: str, gateways: Sequence[str]) -> None: ...


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class Log(Protocol):
    def error(self, message: str) -> None: ...

    def warning(self, message: str) -> None: ...

    def verbose(self, message: str) -> None: ...

    def debug(self, message: str) -> None: ...
