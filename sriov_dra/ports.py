"""The ports: every Protocol the flows are written against, so tests plug in fakes and production the adapters.

The adapters live in sriov_dra.kube (API server), sriov_dra.sysfs (VF drivers) and sriov_dra.state
(checkpoint file, CDI dir); sriov_dra.app.wiring is the only place that hands them to the flows.
API reads return None for NotFound where a missing object is a normal answer; every other API
failure is a sriov_dra.apierrors.ApiError.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar, runtime_checkable

from sriov_dra.core.bindingrecord import BindingRecord
from sriov_dra.core.selection import PatchOp
from sriov_dra.core.shadowmatch import ShadowIndex
from sriov_dra.model import RdmaDevice


@runtime_checkable
class ClaimReader(Protocol):
    """Live ResourceClaim reads (resource.k8s.io/v1), as plain JSON-shaped dicts."""

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any]: ...


@runtime_checkable
class ClaimStatusApi(ClaimReader, Protocol):
    """A claim read plus the JSON Patch of its status (status.devices)."""

    def patch_claim_status(
        self, namespace: str, name: str, ops: list[dict[str, Any]]
    ) -> Mapping[str, Any]: ...


@runtime_checkable
class PodReader(Protocol):
    """Live Pod reads; consumer verification needs nothing more."""

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None: ...


@runtime_checkable
class PodClient(PodReader, Protocol):
    """A Pod read plus the guarded JSON Patch that publishes or withdraws network selections."""

    def patch_pod(self, namespace: str, name: str, ops: list[PatchOp]) -> dict[str, Any]: ...


@runtime_checkable
class NadClient(Protocol):
    """NetworkAttachmentDefinition calls; reads return None for NotFound, writes raise ApiError."""

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def create_nad(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def delete_nad(self, namespace: str, name: str, uid: str) -> None:
        """Delete with a UID precondition; NotFound is success."""

    def patch_nad(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]: ...


@runtime_checkable
class ShadowLister(Protocol):
    def list_shadows(self, node_uid: str) -> Iterable[dict[str, Any]]:
        """This node's managed shadows as one consistent listing, possibly streamed."""


@runtime_checkable
class NamespaceShadowLister(Protocol):
    def list_namespace_shadows(self, node_uid: str, namespace: str) -> Iterable[dict[str, Any]]:
        """This node's managed shadows in one namespace as one consistent listing, possibly streamed."""


@runtime_checkable
class PodLister(Protocol):
    def list_node_pods(self, node_name: str) -> Iterable[dict[str, Any]]:
        """The Pods bound to this node as one consistent listing, possibly streamed: selected by
        spec.nodeName on the API server, so each is on this node; their metadata at least (a
        lister may leave out spec and status, which no caller reads)."""


@runtime_checkable
class ClaimLister(Protocol):
    def list_claims(self, namespace: str) -> Iterable[Mapping[str, Any]]:
        """The ResourceClaims of one namespace as one consistent listing, possibly streamed (a
        node never lists every claim of the cluster: issue 34)."""


@runtime_checkable
class EventSink(Protocol):
    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None: ...


@runtime_checkable
class SliceApi(Protocol):
    """ResourceSlice access for this node and driver."""

    def list(self) -> list[dict[str, Any]]: ...

    def create(self, body: Mapping[str, Any]) -> None: ...

    def replace(self, name: str, body: Mapping[str, Any]) -> None: ...

    def delete(self, name: str) -> None: ...


@runtime_checkable
class PolicySource(Protocol):
    """SriovResourcePolicy and DeviceAttributes of the driver's namespace, and this Node's labels."""

    node_name: str

    def policies(self) -> list[dict[str, Any]]: ...

    def device_attributes(self) -> list[dict[str, Any]]: ...

    def node(self) -> tuple[str, dict[str, str]]: ...


@runtime_checkable
class VfDriver(Protocol):
    """Kernel-driver binding of one VF through sysfs."""

    def bind(self, bdf: str, driver: str) -> str: ...

    def restore(self, bdf: str, original: str) -> None: ...

    def verify_kernel_netdev(self, bdf: str) -> None: ...

    def iommu_group(self, bdf: str) -> str | None: ...

    def rdma(self, bdf: str) -> RdmaDevice | None:
        """The VF's RDMA device as bound now; None without RDMA (or on vfio-pci)."""


@runtime_checkable
class CdiSpecs(Protocol):
    """CDI spec files, one per claim or Pod UID."""

    def exists(self, uid: str) -> bool: ...

    def write(self, uid: str, spec: Mapping[str, Any]) -> None: ...

    def remove(self, uid: str) -> None: ...


class LiveClaim(Protocol):
    """A checkpointed claim as repair reads it live, before deciding whether it may repair it."""

    @property
    def pod(self) -> Mapping[str, Any]:
        """The Pod its reservation names, read live and checked to be on this node."""

    @property
    def devices(self) -> Collection[tuple[str, str]]:
        """(pool, device) of every VF of this driver it allocates now."""


LiveT = TypeVar("LiveT", bound=LiveClaim)


class ManagedClaims(Protocol[LiveT]):
    """Managed preparation as repair reaches it (sriov_dra.prepare.managed.ManagedPreparer provides
    it): the locks kubelet's calls take, the release kubelet authorized, and the live path's read
    and forward repair. Repair decides which of them a claim gets (sriov_dra.recovery.claimrepair)."""

    def claim_then_pod(self, claim_uid: str, pod_uid: str) -> AbstractContextManager[None]:
        """Hold the claim's lock, then its Pod's, as kubelet's prepare and unprepare do."""

    def release_managed_claim(self, claim_uid: str) -> None:
        """Resume the claim's release; under the caller's locks."""

    def read_live(self, namespace: str, name: str, claim_uid: str) -> LiveT:
        """Read the claim, resolve its Pod and its allocation, as a prepare would."""

    def repair_forward(self, live: LiveT, listed: ShadowIndex | None) -> None:
        """Ensure the bindings of `live`'s Pod and report the claim's status.devices; under the
        caller's locks. A shadow `listed` exactly as recorded costs no read."""

    def status_behind(
        self, claim: Mapping[str, Any], pod: Mapping[str, Any], bindings: Sequence[BindingRecord]
    ) -> bool:
        """Whether the claim's status.devices would be written for these Ready bindings."""


@runtime_checkable
class CheckpointStorage(Protocol):
    """Where the serialized checkpoint lives; the file adapter in production, a fake in tests."""

    def read(self) -> bytes | None: ...

    def write(self, data: bytes) -> None: ...
