"""Managed network bindings (spec 8.1, 8.2: render before hardware, then only retry forward; 8.4:
release in a fixed order): prepare -> shadow NAD -> Pod selections, and strict release.

Prepare, per claim: verify the consumer; under the claim-then-Pod locks validate and render
everything before any hardware change; run the ordinary host/CDI preparation, which checkpoints
the bindings as Pending; then ensure shadows, publish the Pod's selections and persist Ready.
After Pending, failures keep all state and are retried forward by kubelet: a lost response may
still mean a write happened, so nothing already visible is rolled back.

Release, per claim, in exactly this order: Deleting, delete each shadow by UID, withdraw this
claim's selections, restore the hardware, ReleaseComplete, remove our finalizer, forget the claim.
A ReleaseComplete retry never repeats the hardware steps.

Repair (sriov_dra.recovery) decides which claims to converge and how; it reaches this service only
through the sriov_dra.ports.ManagedClaims port: the same locks, the release, and the live path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from sriov_contract.binding import SourceRef
from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.core.bindingrecord import (
    DELETING,
    PENDING,
    READY,
    RELEASE_COMPLETE,
    RELEASE_PHASES,
    BindingRecord,
    frozen_device_info,
    phases_of,
    records_of,
)
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.interfaceplan import AllocatedDevice, plan_interfaces
from sriov_dra.core.selection import merge_managed_selections
from sriov_dra.core.shadowconfig import render_shadow_config
from sriov_dra.core.shadowmatch import ShadowIndex
from sriov_dra.core.template import NamespacedName, resolve_template
from sriov_dra.kubeletplugin.api import ClaimRef, DeviceResult, PrepareOutcome
from sriov_dra.model import DRIVER_NAME, USERSPACE_DRIVERS
from sriov_dra.observe.bindingreporter import NULL_OBSERVER, PhaseObserver
from sriov_dra.ports import ClaimReader, NadClient, PodClient
from sriov_dra.prepare.consumer import Consumer, ConsumerError, ConsumerResolver, check_new_consumer
from sriov_dra.prepare.crashpoints import crash_point
from sriov_dra.prepare.devicestatus import DeviceStatusWriter, ready_reports
from sriov_dra.prepare.host import Allocated, HostDevices, PrepareError
from sriov_dra.prepare.locks import OperationLocks
from sriov_dra.prepare.nodeservice import fetch_claim, prepare_each, results, unprepare_each
from sriov_dra.prepare.podnetworks import publish_selections, withdraw_claim_selections
from sriov_dra.prepare.shadows import (
    SHADOW_WORKERS,
    ensure_claim_shadows,
    finalize_released_shadow,
    request_shadow_deletion,
)
from sriov_dra.state.checkpoint import PreparedClaims

log = logging.getLogger(__name__)

# Other claims' devices only take part in interface numbering; their templates are resolved when
# those claims are prepared, so a fixed placeholder keeps the plan independent of them.
_OTHER_CLAIM_TEMPLATE: Final = NamespacedName("", "")
# A syntactically valid UID for the pre-hardware dry run of the Pod merge; never written anywhere.
_DRY_RUN_UID: Final = "00000000-0000-0000-0000-000000000000"
# The pseudo-phase reported once a released claim is forgotten.
RELEASED: Final = "Released"
# The operation a failed status.devices write is reported under (events, metrics).
DEVICE_STATUS: Final = "device-status"

_T = TypeVar("_T")


@dataclass(frozen=True)
class LiveConsumer:
    """A checkpointed claim read live for repair (sriov_dra.ports.LiveClaim): the claim, its
    verified Pod and every claim that Pod references, and what the claim allocates now."""

    ref: ClaimRef
    claim: Mapping[str, Any]
    consumer: Consumer
    devices: tuple[tuple[str, str], ...]
    """(pool, device) of each of this driver's VFs in the claim's allocation."""

    @property
    def pod(self) -> Mapping[str, Any]:
        return self.consumer.pod


class ManagedPreparer:
    """The NodeService when --multus-auto-attach is on, and repair's ManagedClaims."""

    def __init__(
        self,
        *,
        claims: ClaimReader,
        devices: HostDevices,
        resolver: ConsumerResolver,
        nads: NadClient,
        pods: PodClient,
        checkpoint: PreparedClaims,
        node_name: str,
        node_uid: str,
        eligible_attributes: Callable[[str], Mapping[str, object] | None],
        locks: OperationLocks | None = None,
        sleep: Callable[[float], None] = time.sleep,
        observer: PhaseObserver = NULL_OBSERVER,
        device_status: DeviceStatusWriter | None = None,
    ) -> None:
        self._claims = claims
        self._devices = devices
        self._resolver = resolver
        self._nads = nads
        self._pods = pods
        self._checkpoint = checkpoint
        self._node_name = node_name
        self._node_uid = node_uid
        self._eligible = eligible_attributes
        self.locks = locks or OperationLocks()
        self._sleep = sleep
        self._observer = observer
        self._device_status = device_status
        # One pool for the agent's life: starting its threads anew took a 32-VF prepare ~15 ms.
        self._shadow_pool = ThreadPoolExecutor(SHADOW_WORKERS, thread_name_prefix="shadow")

    # -- NodeService ---------------------------------------------------------------------------

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        return prepare_each(claims, self._reporting("prepare", self._prepare_claim))

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        return unprepare_each(claims, self._reporting("cleanup", self._unprepare_claim))

    def _reporting(self, operation: str, run: Callable[[ClaimRef], _T]) -> Callable[[ClaimRef], _T]:
        def reported(ref: ClaimRef) -> _T:
            try:
                return run(ref)
            except ReasonedError as exc:
                self._observer.failed(operation, ref, self._checkpoint.snapshot_claim(ref.uid), exc)
                raise

        return reported

    # -- ManagedClaims: what repair (sriov_dra.recovery.claimrepair) asks of this service --------

    def claim_then_pod(self, claim_uid: str, pod_uid: str) -> AbstractContextManager[None]:
        return self.locks.claim_then_pod(claim_uid, pod_uid)

    def read_live(self, namespace: str, name: str, claim_uid: str) -> LiveConsumer:
        ref = ClaimRef(namespace, name, claim_uid)
        claim = self._fetch_claim(ref)
        consumer = self._resolver.resolve(claim)
        allocated = self._devices.allocated(claim, f"claim {ref.namespace}/{ref.name}")
        return LiveConsumer(ref, claim, consumer, tuple((a.pool, a.vf.name) for a in allocated))

    def repair_forward(self, live: LiveConsumer, listed: ShadowIndex | None) -> None:
        self.ensure_managed_bindings(live.consumer, live.ref, listed, restore=True)
        self._report_devices(live.ref, live.claim, live.consumer, patient=True)

    def status_behind(
        self, claim: Mapping[str, Any], pod: Mapping[str, Any], bindings: Sequence[BindingRecord]
    ) -> bool:
        writer = self._device_status
        return writer is not None and writer.would_write(claim, ready_reports(bindings, pod))

    # -- prepare -------------------------------------------------------------------------------

    def _fetch_claim(self, ref: ClaimRef) -> Mapping[str, Any]:
        return fetch_claim(self._claims, ref)

    def _prepare_claim(self, ref: ClaimRef) -> tuple[DeviceResult, ...]:
        claim = self._fetch_claim(ref)
        consumer = self._resolver.resolve(claim)
        with self.locks.claim_then_pod(ref.uid, consumer.uid):
            recorded = self._checkpoint.snapshot_claim(ref.uid)
            if recorded is None:
                check_new_consumer(consumer.pod, claim)
                where = f"claim {ref.namespace}/{ref.name}"
                allocated = self._devices.allocated(claim, where)
                bindings = self._plan(consumer, claim, allocated)
                recorded = self._devices.prepare_devices(
                    ref, consumer.uid, allocated, {device: b.to_json() for device, b in bindings.items()}
                )
                self._observer.phase(recorded, PENDING)
                crash_point("prepare-pending")
            else:
                _check_reusable(recorded, consumer)
                self._devices.ensure_cdi(recorded)
            self.ensure_managed_bindings(consumer, ref)
            self._report_devices(ref, claim, consumer, patient=False)
            return results(recorded)

    def _plan(
        self, consumer: Consumer, claim: Mapping[str, Any], allocated: Sequence[Allocated]
    ) -> dict[str, BindingRecord]:
        """Validate and render every binding of this claim; nothing here touches hardware."""
        claim_uid = str(claim["metadata"]["uid"])
        devices = [self._allocated_device(consumer, claim_uid, a) for a in allocated]
        for uid, other in consumer.claims.items():
            if uid != claim_uid:
                devices += [
                    AllocatedDevice(
                        uid,
                        a.request,
                        a.pool,
                        a.vf.name,
                        a.vf.pci_address,
                        _OTHER_CLAIM_TEMPLATE,
                        a.config.if_name,
                        a.config.driver,
                    )
                    for a in self._devices.allocated(
                        other, f"claim {consumer.namespace}/{other['metadata']['name']}"
                    )
                ]
        plan = plan_interfaces(
            node_uid=self._node_uid,
            pod_uid=consumer.uid,
            driver=DRIVER_NAME,
            claim_aliases=consumer.aliases,
            devices=devices,
        )
        sources: dict[NamespacedName, tuple[SourceRef, Mapping[str, Any]]] = {}
        vfs = {a.vf.name: a.vf for a in allocated}
        out: dict[str, BindingRecord] = {}
        for index, planned in enumerate(plan):
            if planned.identity.claim_uid != claim_uid:
                continue
            if planned.template not in sources:
                sources[planned.template] = self._source(planned.template)
            source, nad = sources[planned.template]
            rendered = render_shadow_config(nad, planned.pci_address)
            out[planned.identity.device] = BindingRecord(
                phase=PENDING,
                identity=planned.identity,
                node_name=self._node_name,
                pod_namespace=consumer.namespace,
                pod_name=consumer.name,
                plan_index=index,
                interface=planned.interface,
                pci_address=planned.pci_address,
                source=source,
                config=rendered.config.decode(),
                **frozen_device_info(vfs[planned.identity.device]),
            )
        # Manual-selection conflicts and the annotation size limit fail now, not after hardware changes.
        merge_managed_selections(
            consumer.pod, [b.with_shadow_uid(_DRY_RUN_UID).managed_selection() for b in out.values()]
        )
        return out

    def _allocated_device(self, consumer: Consumer, claim_uid: str, a: Allocated) -> AllocatedDevice:
        name = a.vf.name
        if a.config.driver in USERSPACE_DRIVERS:
            raise PrepareError(
                reasons.UNSUPPORTED_MANAGED_DRIVER,
                f"device {name} is configured for driver {a.config.driver}; managed networks need a kernel "
                "netdevice VF: remove driver from the VfConfig",
                device=name,
            )
        attributes = self._eligible(name)
        if attributes is None:
            raise PrepareError(
                reasons.DEVICE_NOT_ELIGIBLE,
                f"device {name} is not advertised by any SriovResourcePolicy right now (the allocation is "
                "stale); delete the claim so the scheduler allocates again",
                device=name,
            )
        template = resolve_template(attributes, a.config, consumer.namespace, name)
        return AllocatedDevice(
            claim_uid, a.request, a.pool, name, a.vf.pci_address, template, a.config.if_name, a.config.driver
        )

    def _source(self, ref: NamespacedName) -> tuple[SourceRef, Mapping[str, Any]]:
        nad = self._nads.get_nad(ref.namespace, ref.name)
        if nad is None:
            raise PrepareError(
                reasons.SOURCE_NETWORK_NOT_FOUND,
                f"NetworkAttachmentDefinition {ref} does not exist; create it or fix the template reference",
                source=str(ref),
            )
        meta = nad.get("metadata") or {}
        return SourceRef(ref.namespace, ref.name, str(meta.get("uid")), str(meta.get("resourceVersion"))), nad

    def ensure_managed_bindings(
        self, consumer: Consumer, ref: ClaimRef, listed: ShadowIndex | None = None, *, restore: bool = False
    ) -> None:
        """EnsureManagedBindings: shadows of every active claim of the Pod, one Pod merge, Ready.

        Runs under the caller's locks. Another claim whose shadow cannot be ensured is left out of
        the merge (and retried on its own prepare) rather than published half-made.
        """
        published: list[BindingRecord] = []
        pending: set[str] = set()
        for recorded in self._checkpoint.snapshot_pod(consumer.uid):
            if phases_of(recorded) & RELEASE_PHASES:
                continue
            try:
                ensured = ensure_claim_shadows(
                    self._nads, self._checkpoint, self._shadow_pool, recorded, listed, restore=restore
                )
            except ReasonedError as exc:
                if recorded.claim_uid == ref.uid:
                    raise
                log.warning(
                    "claim %s of Pod %s left out of this merge: %s", recorded.claim_uid, consumer.uid, exc
                )
                continue
            published += ensured
            if any(b.phase == PENDING for b in ensured):
                pending.add(recorded.claim_uid)
        published.sort(key=lambda b: b.plan_index)
        publish_selections(
            self._pods,
            consumer.namespace,
            consumer.name,
            lambda pod: self._verify_consumer(pod, consumer, ref),
            [b.managed_selection() for b in published],
            sleep=self._sleep,
        )
        crash_point("prepare-pod")
        for uid in sorted(pending):
            if self._checkpoint.set_managed_phase(uid, READY, keep=RELEASE_PHASES):
                self._notify(uid, READY)
        crash_point("prepare-ready")

    def _report_devices(
        self, ref: ClaimRef, claim: Mapping[str, Any], consumer: Consumer, *, patient: bool
    ) -> None:
        """status.devices for the claim's Ready bindings (diagnostics; later repair passes retry)."""
        writer, recorded = self._device_status, self._checkpoint.snapshot_claim(ref.uid)
        if writer is not None and recorded is not None:
            self._best_effort(
                ref,
                recorded,
                lambda: writer.publish(
                    claim, ready_reports([b for _d, b in records_of(recorded)], consumer.pod), patient=patient
                ),
            )

    def _withdraw_devices(self, recorded: ClaimRecord) -> None:
        writer = self._device_status
        if writer is not None:
            keys = {(DRIVER_NAME, d.pool, d.device, "") for d in recorded.devices}
            self._best_effort(
                ClaimRef(recorded.namespace, recorded.name, recorded.claim_uid),
                recorded,
                lambda: writer.withdraw(recorded.namespace, recorded.name, recorded.claim_uid, keys),
            )

    def _best_effort(self, ref: ClaimRef, recorded: ClaimRecord, write: Callable[[], bool]) -> None:
        """Run a status.devices write that must never fail a prepare or a release: any failure, a
        bug included, is reported (log, Event, metric) and left to the next attempt."""
        try:
            write()
        except ReasonedError as exc:
            self._observer.failed(DEVICE_STATUS, ref, recorded, exc)
        except Exception as exc:
            log.exception("status.devices of claim %s/%s failed unexpectedly", ref.namespace, ref.name)
            error = ReasonedError(
                reasons.DEVICE_STATUS_FAILED, f"{exc.__class__.__name__}: {exc}; see the driver log"
            )
            self._observer.failed(DEVICE_STATUS, ref, recorded, error)

    def _notify(self, claim_uid: str, phase: str) -> None:
        recorded = self._checkpoint.snapshot_claim(claim_uid)
        if recorded is not None:
            self._observer.phase(recorded, phase)

    def _observed(self, claim_uid: str, device: str, binding: BindingRecord, uid: str) -> BindingRecord:
        """Persist a newly observed shadow UID (created, or adopted after the full identity check)."""
        if not uid or uid == binding.shadow_uid:
            return binding
        binding = binding.with_shadow_uid(uid)
        self._checkpoint.update_managed_bindings(claim_uid, {device: binding.to_json()})
        return binding

    def _verify_consumer(self, pod: Mapping[str, Any], consumer: Consumer, ref: ClaimRef) -> None:
        """Before every Pod write: the same Pod, on this node, still holding the claim's reservation."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if meta.get("uid") != consumer.uid or spec.get("nodeName") != self._node_name:
            raise ConsumerError(
                reasons.POD_REPLACED,
                f"Pod {consumer.namespace}/{consumer.name} is no longer UID {consumer.uid} on node "
                f"{self._node_name}; its networks are not published",
            )
        reserved = (self._fetch_claim(ref).get("status") or {}).get("reservedFor") or []
        if consumer.uid not in {r.get("uid") for r in reserved}:
            raise ConsumerError(
                reasons.RESERVATION_LOST,
                f"claim {ref.namespace}/{ref.name} is no longer reserved for Pod {consumer.namespace}/"
                f"{consumer.name} ({consumer.uid}); its networks are not published",
            )

    # -- release -------------------------------------------------------------------------------

    def _unprepare_claim(self, ref: ClaimRef) -> None:
        recorded = self._checkpoint.snapshot_claim(ref.uid)
        if recorded is None or "" in phases_of(recorded):
            # Never recorded (a kill before the Pending record may have left a CDI spec) or
            # prepared before managed mode was on: no API objects exist, release the host side.
            self._devices.release_claim(ref.uid)
            return
        with self.locks.claim_then_pod(ref.uid, recorded.pod_uid):
            self.release_managed_claim(ref.uid)

    def release_managed_claim(self, claim_uid: str) -> None:
        """ReleaseManagedClaim: Deleting, shadows deleted by UID, this claim's Pod entries withdrawn,
        VFs and CDI restored, ReleaseComplete, our finalizers removed, record forgotten.

        Runs under the caller's locks; each step is recorded before the next, so a crash resumes
        where it stopped and the claim UID stays blocked (ClaimReleaseInProgress) until the end.
        """
        before = self._checkpoint.snapshot_claim(claim_uid)
        if before is None:
            return
        hardware_done = phases_of(before) == {RELEASE_COMPLETE}
        if self._checkpoint.set_managed_phase(claim_uid, DELETING, keep=frozenset({RELEASE_COMPLETE})):
            self._notify(claim_uid, DELETING)
        crash_point("unprepare-deleting")
        recorded = self._checkpoint.snapshot_claim(claim_uid)
        assert recorded is not None  # only this thread may remove it, under the claim lock
        shadows: list[tuple[BindingRecord, str]] = []
        for device, binding in records_of(recorded):
            uid = request_shadow_deletion(self._nads, binding)
            shadows.append((self._observed(claim_uid, device.device, binding, uid), uid))
        crash_point("unprepare-shadow-deleted")
        if shadows:  # a claim holding only other drivers' devices never published anything
            first = shadows[0][0]
            withdraw_claim_selections(
                self._pods,
                first.pod_namespace,
                first.pod_name,
                recorded.pod_uid,
                claim_uid,
                sleep=self._sleep,
            )
        crash_point("unprepare-withdrawn")
        if shadows:
            self._withdraw_devices(recorded)
        if not hardware_done:
            self._devices.release_devices(recorded)
            crash_point("unprepare-hardware")
            self._checkpoint.set_managed_phase(claim_uid, RELEASE_COMPLETE)
            self._notify(claim_uid, RELEASE_COMPLETE)
        crash_point("unprepare-release-complete")
        for binding, uid in shadows:
            if uid:
                finalize_released_shadow(self._nads, binding, uid, sleep=self._sleep)
        crash_point("unprepare-finalized")
        self._checkpoint.remove_claim(claim_uid)
        self._observer.phase(recorded, RELEASED)


def _check_reusable(recorded: ClaimRecord, consumer: Consumer) -> None:
    """The already-prepared path: same Pod, still active, and really a managed binding."""
    where = f"claim {recorded.namespace}/{recorded.name} ({recorded.claim_uid})"
    if recorded.pod_uid != consumer.uid or phases_of(recorded) & RELEASE_PHASES:
        raise PrepareError(
            reasons.CLAIM_RELEASE_IN_PROGRESS,
            f"{where} is still recorded for Pod {recorded.pod_uid} and being released or not yet "
            f"unprepared; Pod {consumer.uid} can use it once kubelet has unprepared it",
            claim_uid=recorded.claim_uid,
        )
    records_of(recorded)
