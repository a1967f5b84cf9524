"""NodePrepareResources / NodeUnprepareResources for VFs (without managed network bindings).

Per claim: fetch it, keep only this driver's allocation results, resolve each result's VfConfig,
bind the VF driver, write the claim's CDI spec, checkpoint, then refresh the Pod-global CDI spec.
A failure rolls back what this claim changed and is reported for that claim only. A claim that is
already in the checkpoint is answered from it (and a lost CDI spec is rewritten: after a reboot
the tmpfs spec directory is empty while the checkpoint survives).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from driver import cdi
from driver.checkpoint import ClaimRecord, PreparedClaims, PreparedDevice
from driver.core.vfconfig import VfConfig, effective_vf_config
from driver.discovery import DRIVER_NAME, VirtualFunction
from driver.kubeletplugin.api import ClaimRef, DeviceResult, PrepareOutcome
from driver.vfdriver import USERSPACE_DRIVERS
from sriov_contract.errors import ReasonedError

log = logging.getLogger(__name__)


class PrepareError(ReasonedError):
    """A claim cannot be prepared as allocated."""


class ClaimReader(Protocol):
    """Live ResourceClaim reads (resource.k8s.io/v1), as plain JSON-shaped dicts."""

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any]: ...


class VfDriver(Protocol):
    def bind(self, bdf: str, driver: str) -> str: ...

    def restore(self, bdf: str, original: str) -> None: ...

    def verify_kernel_netdev(self, bdf: str) -> None: ...

    def iommu_group(self, bdf: str) -> str | None: ...


class CdiSpecs(Protocol):
    def exists(self, uid: str) -> bool: ...

    def write(self, uid: str, spec: Mapping[str, Any]) -> None: ...

    def remove(self, uid: str) -> None: ...


@dataclass(frozen=True)
class _Allocated:
    request: str
    pool: str
    vf: VirtualFunction
    config: VfConfig


def vf_config_json(config: VfConfig) -> dict[str, Any]:
    """Upstream's VfConfig JSON (empty fields omitted), as recorded in the checkpoint."""
    out: dict[str, Any] = {
        "driver": config.driver,
        "addVhostMount": config.add_vhost_mount,
        "ifName": config.if_name,
        "netAttachDefName": config.net_attach_def_name,
        "netAttachDefNamespace": config.net_attach_def_namespace,
    }
    return {k: v for k, v in out.items() if v}


def _describe(error: BaseException) -> str:
    if isinstance(error, ReasonedError):
        return f"{error.reason}: {error.message}"
    return f"InternalError: {error.__class__.__name__}: {error}; see the driver log"


class Preparer:
    """The node agent's NodeService: claims in, per-claim outcomes out."""

    def __init__(
        self,
        *,
        node_name: str,
        claims: ClaimReader,
        inventory: Callable[[str], VirtualFunction | None],
        checkpoint: PreparedClaims,
        cdi_specs: CdiSpecs,
        vf_driver: VfDriver,
    ) -> None:
        self._node = node_name
        self._claims = claims
        self._inventory = inventory
        self._checkpoint = checkpoint
        self._cdi = cdi_specs
        self._vf_driver = vf_driver

    # -- NodeService ---------------------------------------------------------------------------

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        out: dict[str, PrepareOutcome] = {}
        for ref in claims:
            try:
                out[ref.uid] = PrepareOutcome(devices=self._prepare_claim(ref))
            except Exception as exc:
                if not isinstance(exc, ReasonedError):
                    log.exception("preparing claim %s/%s (%s) failed", ref.namespace, ref.name, ref.uid)
                out[ref.uid] = PrepareOutcome(error=_describe(exc))
        return out

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        out: dict[str, str] = {}
        for ref in claims:
            try:
                self._unprepare_claim(ref.uid)
                out[ref.uid] = ""
            except Exception as exc:
                if not isinstance(exc, ReasonedError):
                    log.exception("unpreparing claim %s/%s (%s) failed", ref.namespace, ref.name, ref.uid)
                out[ref.uid] = _describe(exc)
        return out

    # -- prepare -------------------------------------------------------------------------------

    def _prepare_claim(self, ref: ClaimRef) -> tuple[DeviceResult, ...]:
        claim = self._claims.get_claim(ref.namespace, ref.name)
        where = f"claim {ref.namespace}/{ref.name}"
        uid = claim.get("metadata", {}).get("uid")
        if uid != ref.uid:
            raise PrepareError(
                "ClaimReplaced",
                f"{where} now has UID {uid}, kubelet asked for {ref.uid}; the claim was recreated",
            )
        recorded = self._checkpoint.snapshot_claim(ref.uid)
        if recorded is not None:
            consumer = _consumer_pod(claim, where)
            if consumer != recorded.pod_uid:
                raise PrepareError(
                    "ClaimReleaseInProgress",
                    f"{where} is still prepared for Pod {recorded.pod_uid}; Pod {consumer} can use it "
                    "once kubelet has unprepared it for the old Pod",
                )
            self._ensure_cdi(recorded)
            return _results(recorded)
        allocated = self._allocated(claim, where)
        pod_uid = _consumer_pod(claim, where)
        record = self._prepare_devices(ref, pod_uid, allocated)
        self._publish(record)
        return _results(record)

    def _allocated(self, claim: Mapping[str, Any], where: str) -> list[_Allocated]:
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            raise PrepareError(
                "ClaimNotAllocated", f"{where} has no allocation; the scheduler has not placed it"
            )
        devices = allocation.get("devices") or {}
        configs = devices.get("config") or []
        out = []
        for result in devices.get("results") or []:
            if result.get("driver") != DRIVER_NAME:
                continue  # another driver's device (a GPU, say) in the same claim
            name, pool = result.get("device", ""), result.get("pool", "")
            if result.get("shareID") or result.get("adminAccess"):
                raise PrepareError(
                    "UnsupportedSharedAllocation",
                    f"{where} allocates {name} with adminAccess or a share ID; VFs are exclusive",
                )
            vf = self._inventory(name)
            if pool != self._node or vf is None:
                raise PrepareError(
                    "UnknownDevice",
                    f"{where} allocates {pool}/{name}, which this node ({self._node}) does not have; "
                    "delete the claim so the scheduler allocates again",
                )
            config = effective_vf_config(configs, result.get("request", ""), DRIVER_NAME)
            out.append(_Allocated(result.get("request", ""), pool, vf, config))
        return out

    def _prepare_devices(self, ref: ClaimRef, pod_uid: str, allocated: list[_Allocated]) -> ClaimRecord:
        done: list[tuple[str, str]] = []
        try:
            devices = []
            for a in allocated:
                bdf = a.vf.pci_address
                original = self._vf_driver.bind(bdf, a.config.driver)
                done.append((bdf, original if a.config.driver else ""))
                devices.append(self._device(ref.uid, pod_uid, a, original))
            record = ClaimRecord(ref.uid, ref.namespace, ref.name, pod_uid, tuple(devices))
            self._cdi.write(ref.uid, _claim_cdi(record))
            self._checkpoint.add_claim(record)
            return record
        except BaseException:
            self._cdi.remove(ref.uid)
            self._restore(done)
            raise

    def _device(self, claim_uid: str, pod_uid: str, a: _Allocated, original: str) -> PreparedDevice:
        bdf, name = a.vf.pci_address, a.vf.name
        infix = cdi.env_name(name)
        env = {
            f"SRIOVNETWORK_VF_DEVICE_{infix}": bdf,
            "SRIOVNETWORK_NET_ATTACH_DEF_NAME": a.config.net_attach_def_name,
        }
        nodes: list[str] = []
        if a.config.driver == "vfio-pci":
            group = self._vf_driver.iommu_group(bdf)
            if group is None:
                raise PrepareError("VfioGroupMissing", f"VF {bdf} bound to vfio-pci has no IOMMU group")
            nodes = [f"/dev/vfio/{group}", "/dev/vfio/vfio"]
            env[f"SRIOVNETWORK_{infix}_VFIO_DEVICE"] = nodes[0]
        elif a.config.driver not in USERSPACE_DRIVERS:
            self._vf_driver.verify_kernel_netdev(bdf)
        if a.config.add_vhost_mount:
            nodes += ["/dev/vhost-net", "/dev/net/tun"]
        return PreparedDevice(
            request_names=(a.request.split("/", 1)[0],),
            pool=a.pool,
            device=name,
            pci_address=bdf,
            cdi_device_ids=(cdi.claim_device_id(claim_uid, name), cdi.pod_device_id(pod_uid)),
            original_driver=original,
            config=vf_config_json(a.config),
            if_name=a.config.if_name,
            env=env,
            device_nodes=tuple(nodes),
        )

    def _publish(self, record: ClaimRecord) -> None:
        try:
            self._write_pod_cdi(record.pod_uid)
        except BaseException:
            self._unprepare_claim(record.claim_uid)
            raise

    def _ensure_cdi(self, record: ClaimRecord) -> None:
        if not self._cdi.exists(record.claim_uid):
            log.info("rewriting the missing CDI spec of prepared claim %s", record.claim_uid)
            self._cdi.write(record.claim_uid, _claim_cdi(record))
        if not self._cdi.exists(record.pod_uid):
            self._write_pod_cdi(record.pod_uid)

    def _write_pod_cdi(self, pod_uid: str) -> None:
        """Rebuild the Pod-global spec from every claim of the Pod still in the checkpoint."""
        pcis = [d.pci_address for r in self._checkpoint.snapshot_pod(pod_uid) for d in r.devices]
        if pcis:
            self._cdi.write(pod_uid, cdi.pod_spec(pod_uid, sorted(pcis)))
        else:
            self._cdi.remove(pod_uid)

    # -- unprepare -----------------------------------------------------------------------------

    def _unprepare_claim(self, claim_uid: str) -> None:
        record = self._checkpoint.snapshot_claim(claim_uid)
        if record is None:
            return  # never prepared here, or already released: unprepare is idempotent
        self._restore([(d.pci_address, d.original_driver) for d in record.devices if d.config.get("driver")])
        self._cdi.remove(claim_uid)
        self._checkpoint.remove_claim(claim_uid)
        # Another claim of the same Pod may still be prepared and need the Pod-global device.
        self._write_pod_cdi(record.pod_uid)

    def _restore(self, bound: Sequence[tuple[str, str]]) -> None:
        for bdf, original in reversed(bound):
            self._vf_driver.restore(bdf, original)


def _consumer_pod(claim: Mapping[str, Any], where: str) -> str:
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    pods = [r for r in reserved if r.get("resource") == "pods" and not r.get("apiGroup")]
    if len(reserved) != 1 or len(pods) != 1 or not pods[0].get("uid"):
        raise PrepareError(
            "UnsupportedConsumer",
            f"{where} must be reserved for exactly one Pod (found {len(reserved)} consumer(s)); "
            "VF claims cannot be shared",
        )
    return str(pods[0]["uid"])


def _claim_cdi(record: ClaimRecord) -> dict[str, Any]:
    return cdi.claim_spec(record.claim_uid, [(d.device, d.env, d.device_nodes) for d in record.devices])


def _results(record: ClaimRecord) -> tuple[DeviceResult, ...]:
    return tuple(DeviceResult(d.request_names, d.pool, d.device, d.cdi_device_ids) for d in record.devices)
