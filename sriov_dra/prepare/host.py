"""The host side of a claim, for both NodeServices: its VFs, their drivers, its CDI specs and its
checkpoint record.

`HostDevices` turns a claim's allocation into this node's VFs with their VfConfig (`allocated`),
binds their drivers, writes the claim's CDI spec and checkpoints it, all or nothing
(`prepare_devices`), rewrites a lost spec (`ensure_cdi`), and restores all of it on release
(`release_devices`, `release_claim`). It reads no API object: the NodeServices
(sriov_dra.prepare.plain, sriov_dra.prepare.managed) fetch the claim and decide when to call it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.core.bindingrecord import RELEASE_PHASES, phases_of
from sriov_dra.core.claimrecord import ClaimRecord, PreparedDevice
from sriov_dra.core.hostdevice import VFIO_DRIVER, prepared_device
from sriov_dra.core.vfconfig import VfConfig, effective_vf_config
from sriov_dra.kubeletplugin.api import ClaimRef
from sriov_dra.model import DRIVER_NAME, USERSPACE_DRIVERS, VirtualFunction
from sriov_dra.ports import CdiSpecs, VfDriver
from sriov_dra.prepare.crashpoints import crash_point
from sriov_dra.state import cdi
from sriov_dra.state.checkpoint import PreparedClaims

log = logging.getLogger(__name__)


class PrepareError(ReasonedError):
    """A claim cannot be prepared as allocated."""


@dataclass(frozen=True)
class Allocated:
    request: str
    pool: str
    vf: VirtualFunction
    config: VfConfig


class HostDevices:
    """This node's VFs as claims use them: bound, described to the runtime (CDI), checkpointed."""

    def __init__(
        self,
        *,
        node_name: str,
        inventory: Callable[[str], VirtualFunction | None],
        checkpoint: PreparedClaims,
        cdi_specs: CdiSpecs,
        vf_driver: VfDriver,
    ) -> None:
        self._node = node_name
        self._inventory = inventory
        self._checkpoint = checkpoint
        self._cdi = cdi_specs
        self._vf_driver = vf_driver

    # -- prepare -------------------------------------------------------------------------------

    def allocated(self, claim: Mapping[str, Any], where: str) -> list[Allocated]:
        """This driver's results in the claim's allocation, as this node's VFs with their VfConfig."""
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            raise PrepareError(
                reasons.CLAIM_NOT_ALLOCATED, f"{where} has no allocation; the scheduler has not placed it"
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
                    reasons.UNSUPPORTED_SHARED_ALLOCATION,
                    f"{where} allocates {name} with adminAccess or a share ID; VFs are exclusive",
                )
            vf = self._inventory(name)
            if pool != self._node or vf is None:
                raise PrepareError(
                    reasons.UNKNOWN_DEVICE,
                    f"{where} allocates {pool}/{name}, which this node ({self._node}) does not have; "
                    "delete the claim so the scheduler allocates again",
                )
            config = effective_vf_config(configs, result.get("request", ""), DRIVER_NAME)
            out.append(Allocated(result.get("request", ""), pool, vf, config))
        return out

    def prepare_devices(
        self,
        ref: ClaimRef,
        pod_uid: str,
        allocated: Sequence[Allocated],
        bindings: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> ClaimRecord:
        """Bind VF drivers, write CDI, checkpoint (with each device's managed binding, keyed by
        device name) and refresh the Pod-global CDI spec; any failure undoes all of it."""
        done: list[tuple[str, str]] = []
        try:
            devices = []
            for a in allocated:
                bdf = a.vf.pci_address
                original = self._vf_driver.bind(bdf, a.config.driver)
                done.append((bdf, original if a.config.driver else ""))
                devices.append(self._device(ref.uid, pod_uid, a, original, (bindings or {}).get(a.vf.name)))
            record = ClaimRecord(ref.uid, ref.namespace, ref.name, pod_uid, tuple(devices))
            self._cdi.write(ref.uid, _claim_cdi(record))
            crash_point("prepare-host")
            self._checkpoint.add_claim(record)
        except BaseException:
            self._cdi.remove(ref.uid)
            self._restore(done)
            raise
        self._publish(record)
        return record

    def _device(
        self, claim_uid: str, pod_uid: str, a: Allocated, original: str, binding: Mapping[str, Any] | None
    ) -> PreparedDevice:
        bdf = a.vf.pci_address
        group = None
        rdma = None
        if a.config.driver == VFIO_DRIVER:
            group = self._vf_driver.iommu_group(bdf)
            if group is None:
                raise PrepareError(
                    reasons.VFIO_GROUP_MISSING, f"VF {bdf} bound to vfio-pci has no IOMMU group"
                )
        elif a.config.driver not in USERSPACE_DRIVERS:
            self._vf_driver.verify_kernel_netdev(bdf)
            # Read after binding: the RDMA device exists only while a kernel driver holds the VF.
            rdma = self._vf_driver.rdma(bdf)
        return prepared_device(
            claim_uid=claim_uid,
            pod_uid=pod_uid,
            request=a.request,
            pool=a.pool,
            name=a.vf.name,
            pci_address=bdf,
            config=a.config,
            original_driver=original,
            binding=binding,
            iommu_group=group,
            rdma=rdma,
        )

    def _publish(self, record: ClaimRecord) -> None:
        try:
            self._write_pod_cdi(record.pod_uid)
        except BaseException:
            self.release_claim(record.claim_uid)
            raise

    def ensure_cdi(self, record: ClaimRecord) -> None:
        if not self._cdi.exists(record.claim_uid):
            log.info("rewriting the missing CDI spec of prepared claim %s", record.claim_uid)
            self._cdi.write(record.claim_uid, _claim_cdi(record))
        if not self._cdi.exists(record.pod_uid):
            self._write_pod_cdi(record.pod_uid)

    def _write_pod_cdi(self, pod_uid: str) -> None:
        """Rebuild the Pod-global spec from every claim of the Pod still in use; a claim whose managed
        release has begun is no longer a consumer."""
        pcis = [
            d.pci_address
            for r in self._checkpoint.snapshot_pod(pod_uid)
            if not phases_of(r) & RELEASE_PHASES
            for d in r.devices
        ]
        if pcis:
            self._cdi.write(pod_uid, cdi.pod_spec(pod_uid, sorted(pcis)))
        else:
            self._cdi.remove(pod_uid)

    # -- unprepare -----------------------------------------------------------------------------

    def release_claim(self, claim_uid: str) -> None:
        """Release a claim that has no managed bindings: its VFs, its CDI spec and its record."""
        record = self._checkpoint.snapshot_claim(claim_uid)
        if record is None:
            # Never prepared here, already released, or killed between the CDI write and the
            # checkpoint: only that crash's spec can be left, and no container was given it.
            self._cdi.remove(claim_uid)
            return
        self.release_devices(record, forget=True)

    def release_devices(self, record: ClaimRecord, *, forget: bool = False) -> None:
        """Restore VF drivers and drop the claim's CDI spec; `forget` also drops the checkpoint
        record (managed release keeps it until its API obligations are done). Idempotent."""
        self._restore([(d.pci_address, d.original_driver) for d in record.devices if d.config.get("driver")])
        self._cdi.remove(record.claim_uid)
        if forget:
            self._checkpoint.remove_claim(record.claim_uid)
        # Another claim of the same Pod may still be prepared and need the Pod-global device.
        self._write_pod_cdi(record.pod_uid)

    def _restore(self, bound: Sequence[tuple[str, str]]) -> None:
        for bdf, original in reversed(bound):
            self._vf_driver.restore(bdf, original)


def _claim_cdi(record: ClaimRecord) -> dict[str, Any]:
    return cdi.claim_spec(record.claim_uid, [(d.device, d.env, d.device_nodes) for d in record.devices])
