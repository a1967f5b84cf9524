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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
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
    phases_of,
    records_of,
)
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.interfaceplan import AllocatedDevice, plan_interfaces
from sriov_dra.core.passdrift import HEALTHY, PassListing, by_uid, drift, own_bindings, ready_bindings
from sriov_dra.core.render import render_shadow_config
from sriov_dra.core.selection import merge_managed_selections
from sriov_dra.core.shadowmatch import ShadowIndex, converged, index_shadows
from sriov_dra.core.template import NamespacedName, resolve_template
from sriov_dra.kubeletplugin.api import ClaimRef, DeviceResult, PrepareOutcome
from sriov_dra.model import DRIVER_NAME, USERSPACE_DRIVERS
from sriov_dra.observe.events import NULL_OBSERVER, PhaseObserver
from sriov_dra.ports import ClaimLister, NadClient, PodClient, PodLister, ShadowLister
from sriov_dra.prepare.consumer import Consumer, ConsumerError, ConsumerResolver, check_new_consumer
from sriov_dra.prepare.crashpoints import crash_point
from sriov_dra.prepare.devicestatus import DeviceStatusWriter, ready_reports
from sriov_dra.prepare.host import (
    Allocated,
    HostPreparer,
    PrepareError,
    prepare_each,
    results,
    unprepare_each,
)
from sriov_dra.prepare.locks import OperationLocks
from sriov_dra.prepare.podnetworks import publish_selections, withdraw_claim_selections
from sriov_dra.prepare.shadows import ensure_shadow, finalize_released_shadow, request_shadow_deletion
from sriov_dra.state.checkpoint import PreparedClaims

log = logging.getLogger(__name__)

# Other claims' devices only take part in interface numbering; their templates are resolved when
# those claims are prepared, so a fixed placeholder keeps the plan independent of them.
_OTHER_CLAIM_TEMPLATE: Final = NamespacedName("", "")
# A syntactically valid UID for the pre-hardware dry run of the Pod merge; never written anywhere.
_DRY_RUN_UID: Final = "00000000-0000-0000-0000-000000000000"
# The pseudo-phase reported once a released claim is forgotten.
RELEASED: Final = "Released"
# Shadow requests in flight at once: enough to hide the API round trip, few enough for the
# client's connection pool and a busy API server (16 or 32 made no 32-VF prepare faster on a
# 2-core node: the API server is the bound, and the client opened connections beyond its pool).
SHADOW_WORKERS: Final = 8
# The operation a failed status.devices write is reported under (events, metrics).
DEVICE_STATUS: Final = "device-status"

# What each of a pass's reads lists, for its warning when it fails.
_LISTED: Final = {
    "shadows": "this node's shadows",
    "pods": "this node's Pods",
    "claims": "the ResourceClaims",
    "node_uid": "the Node",
}

_T = TypeVar("_T")


class ManagedPreparer:
    """The NodeService when --multus-auto-attach is on."""

    def __init__(
        self,
        *,
        host: HostPreparer,
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
        shadow_lister: ShadowLister | None = None,
        pod_lister: PodLister | None = None,
        claim_lister: ClaimLister | None = None,
    ) -> None:
        self._host = host
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
        self._shadow_lister = shadow_lister
        self._pod_lister = pod_lister
        self._claim_lister = claim_lister
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

    # -- repair (spec 8.3: converge without kubelet; only kubelet starts a release) ------------

    def list_for_pass(self, records: Sequence[ClaimRecord] | None = None) -> PassListing:
        """One repair pass's listings: this node's shadows, its Pods, the claims and the Node's UID,
        beside what the pass's checkpoint `records` (by default a fresh snapshot) expect of them.

        Each is one consistent read (no resourceVersion); one that is not configured or fails is
        left out, and every claim then takes the live path as it would without it. The reads run
        at once, each on its own thread, and the records are decoded meanwhile: what the API
        server spends on one listing overlaps our decoding of the others.
        """
        if records is None:
            records = self._checkpoint.snapshot_all()
        shadows, pods, claims = self._shadow_lister, self._pod_lister, self._claim_lister
        reads: dict[str, Callable[[], Any]] = {}
        if shadows is not None:
            reads["shadows"] = lambda: index_shadows(shadows.list_shadows(self._node_uid))
        if pods is not None and claims is not None:
            reads["pods"] = lambda: by_uid(pods.list_node_pods(self._node_name))
            reads["claims"] = lambda: by_uid(claims.list_claims())
            reads["node_uid"] = self._resolver.live_node_uid
        with ThreadPoolExecutor(max(1, len(reads)), thread_name_prefix="pass-list") as pool:
            pending = {key: pool.submit(_listed, _LISTED[key], read) for key, read in reads.items()}
            ready = ready_bindings(records)
            listed = {key: future.result() for key, future in pending.items()}
        return PassListing(ready=ready, **listed)

    def repair_claim(
        self, claim_uid: str, listed: PassListing | None = None, *, recorded: ClaimRecord | None = None
    ) -> None:
        """One repair pass over a checkpointed claim, under the same locks as kubelet's calls.

        A release phase records kubelet's earlier authorization, so its release resumes (a
        ReleaseComplete record redoes only API work). An active binding is repaired forward from
        its frozen bytes only while its Pod, claim, allocation and node are still the recorded
        ones; any difference stops repair and never releases hardware: that is kubelet's call.
        A claim the pass's listing shows healthy costs no request; any other takes the live path,
        where a shadow `listed` exactly as recorded still costs no read and the rest is read live.
        `recorded` is the pass's own copy of the claim's record, if it has one: the checks before
        the locks read it; whatever writes re-reads the checkpoint under them.
        """
        if recorded is None:
            recorded = self._checkpoint.snapshot_claim(claim_uid)
        if recorded is None or "" in phases_of(recorded):
            return
        if phases_of(recorded) & RELEASE_PHASES:
            with self.locks.claim_then_pod(claim_uid, recorded.pod_uid):
                self.release_managed_claim(claim_uid)
            return
        if listed is not None and self._healthy(recorded, listed):
            return
        ref = ClaimRef(recorded.namespace, recorded.name, claim_uid)
        claim = self._host.fetch_claim(ref)
        consumer = self._resolver.resolve(claim)
        _check_repairable(
            recorded, consumer, self._host.allocated(claim, f"claim {ref.namespace}/{ref.name}")
        )
        with self.locks.claim_then_pod(claim_uid, consumer.uid):
            current = self._checkpoint.snapshot_claim(claim_uid)
            if current is None or phases_of(current) & RELEASE_PHASES:
                return  # kubelet's release got the locks first
            self.ensure_managed_bindings(consumer, ref, None if listed is None else listed.shadows)
            self._report_devices(ref, claim, consumer, patient=True)

    def _healthy(self, recorded: ClaimRecord, listed: PassListing) -> bool:
        """Nothing the live path would write: the listed objects and the claim's status.devices."""
        why = drift(recorded, listed, node_uid=self._node_uid)
        if why == HEALTHY and self._device_status is not None:
            claim = (listed.claims or {})[recorded.claim_uid]  # drift has seen both
            pod = (listed.pods or {})[recorded.pod_uid]
            reports = ready_reports(own_bindings(listed, recorded), pod)
            why = (
                "its status.devices is behind" if self._device_status.would_write(claim, reports) else HEALTHY
            )
        if why != HEALTHY:
            log.debug(
                "claim %s/%s (%s) takes the live path: %s",
                recorded.namespace,
                recorded.name,
                recorded.claim_uid,
                why,
            )
        return why == HEALTHY

    # -- prepare -------------------------------------------------------------------------------

    def _prepare_claim(self, ref: ClaimRef) -> tuple[DeviceResult, ...]:
        claim = self._host.fetch_claim(ref)
        consumer = self._resolver.resolve(claim)
        with self.locks.claim_then_pod(ref.uid, consumer.uid):
            recorded = self._checkpoint.snapshot_claim(ref.uid)
            if recorded is None:
                check_new_consumer(consumer.pod, claim)
                where = f"claim {ref.namespace}/{ref.name}"
                allocated = self._host.allocated(claim, where)
                bindings = self._plan(consumer, claim, allocated)
                recorded = self._host.prepare_devices(
                    ref, consumer.uid, allocated, {device: b.to_json() for device, b in bindings.items()}
                )
                self._observer.phase(recorded, PENDING)
                crash_point("prepare-pending")
            else:
                _check_reusable(recorded, consumer)
                self._host.ensure_cdi(recorded)
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
                    for a in self._host.allocated(
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
        self, consumer: Consumer, ref: ClaimRef, listed: ShadowIndex | None = None
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
                ensured = self._ensure_shadows(recorded, listed)
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

    def _ensure_shadows(self, recorded: ClaimRecord, listed: ShadowIndex | None) -> list[BindingRecord]:
        """Ensure every shadow of the claim, the missing ones created in parallel; then persist every
        newly observed UID in one checkpoint write. A failure keeps what the others achieved: their
        UIDs are persisted before the first failure (in plan order) is raised."""
        claim_uid = recorded.claim_uid
        bindings = [(d.device, b) for d, b in records_of(recorded)]
        todo = [
            (device, b)
            for device, b in bindings
            if listed is None or not converged(listed.get((b.pod_namespace, b.shadow_name)), b)
        ]
        outcomes = _in_parallel(
            self._shadow_pool, [partial(self._ensure_one, claim_uid, d, b) for d, b in todo]
        )
        if todo:
            crash_point("prepare-created")
        ensured = dict(bindings)
        observed: dict[str, BindingRecord] = {}
        for (device, _binding), outcome in zip(todo, outcomes, strict=True):
            if isinstance(outcome, Exception):
                continue
            current, uid = outcome
            if uid and uid != current.shadow_uid:
                # Created, or adopted after the full identity check: the UID must be persisted.
                current = observed[device] = current.with_shadow_uid(uid)
            ensured[device] = current
        if observed:
            self._checkpoint.update_managed_bindings(claim_uid, {d: b.to_json() for d, b in observed.items()})
        if todo:
            crash_point("prepare-shadow")
        failed = next((o for o in outcomes if isinstance(o, Exception)), None)
        if failed is not None:
            raise failed
        return [ensured[device] for device, _b in bindings]

    def _ensure_one(self, claim_uid: str, device: str, binding: BindingRecord) -> tuple[BindingRecord, str]:
        """The binding as it now stands (a vanished shadow's UID forgotten) and its shadow's UID."""
        current = binding

        def forget(old: BindingRecord) -> BindingRecord:
            nonlocal current
            # Back to Pending: the binding is not whole again until the Pod names the new UID.
            current = old.with_shadow_uid("").with_phase(PENDING)
            self._checkpoint.update_managed_bindings(claim_uid, {device: current.to_json()})
            return current

        uid = ensure_shadow(self._nads, binding, forget)
        return current, uid

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
        reserved = (self._host.fetch_claim(ref).get("status") or {}).get("reservedFor") or []
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
            self._host.unprepare_claim(ref.uid)
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
            self._host.release_devices(recorded)
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


def _in_parallel(pool: ThreadPoolExecutor, calls: Sequence[Callable[[], _T]]) -> list[_T | Exception]:
    """Each call's result or exception, in order, run on `pool` (one runs inline: a single shadow
    is not worth a hand-off). The pool is shared by concurrent prepares, so SHADOW_WORKERS bounds
    the shadow requests of the whole agent in flight at once."""

    def run(call: Callable[[], _T]) -> _T | Exception:
        try:
            return call()
        except Exception as exc:
            return exc

    if len(calls) <= 1:
        return [run(c) for c in calls]
    return list(pool.map(run, calls))


def _listed(what: str, read: Callable[[], _T]) -> _T | None:
    try:
        return read()
    except ReasonedError as exc:
        log.warning("repair pass reads each claim live: listing %s failed: %s", what, exc)
        return None


def _check_repairable(recorded: ClaimRecord, consumer: Consumer, allocated: Sequence[Allocated]) -> None:
    """Forward repair only for the recorded, live Pod and the recorded allocation."""
    where = f"claim {recorded.namespace}/{recorded.name} ({recorded.claim_uid})"
    pod_meta = consumer.pod.get("metadata") or {}
    if consumer.uid != recorded.pod_uid:
        raise ConsumerError(
            reasons.POD_REPLACED,
            f"{where} is now reserved for Pod {consumer.uid}, recorded for {recorded.pod_uid}; repair "
            "stops and the VFs stay prepared until kubelet unprepares the claim",
        )
    if pod_meta.get("deletionTimestamp"):
        raise ConsumerError(
            reasons.POD_TERMINATING,
            f"Pod {consumer.namespace}/{consumer.name} of {where} is terminating; its networks are not "
            "repaired, kubelet releases them on unprepare",
        )
    if sorted((a.pool, a.vf.name) for a in allocated) != sorted((d.pool, d.device) for d in recorded.devices):
        raise ConsumerError(
            reasons.ALLOCATION_CHANGED,
            f"{where} now allocates other devices than the prepared ones; repair stops, the prepared "
            "VFs stay as they are until kubelet unprepares the claim",
        )


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
