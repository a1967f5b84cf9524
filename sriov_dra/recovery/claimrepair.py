"""One checkpointed claim's repair (spec 8.3: converge without kubelet; only kubelet starts a
release): resume a release kubelet authorized, leave a healthy claim alone, or take the live path.

A release phase records kubelet's earlier authorization, so its release resumes (a
ReleaseComplete record redoes only API work). An active binding is repaired forward from its
frozen bytes only while its Pod, claim, allocation and node are still the recorded ones; any
difference stops repair and never releases hardware: that is kubelet's call. A claim the pass's
listing shows healthy costs no request. Managed preparation does the work, reached through the
sriov_dra.ports.ManagedClaims port under the same locks kubelet's calls take.
"""

from __future__ import annotations

import logging
from typing import Generic

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.core.bindingrecord import RELEASE_PHASES, phases_of
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.passdrift import HEALTHY, PassListing, drift, own_bindings
from sriov_dra.ports import LiveClaim, LiveT, ManagedClaims
from sriov_dra.state.checkpoint import PreparedClaims

log = logging.getLogger(__name__)


class RepairStopped(ReasonedError):
    """The claim's Pod or allocation is no longer the recorded one: repair stops until kubelet
    unprepares the claim."""


class ClaimRepairer(Generic[LiveT]):
    """Repairs one claim at a time for the repair worker (sriov_dra.recovery.repair)."""

    def __init__(self, managed: ManagedClaims[LiveT], checkpoint: PreparedClaims, *, node_uid: str) -> None:
        self._managed = managed
        self._checkpoint = checkpoint
        self._node_uid = node_uid

    def repair_claim(
        self, claim_uid: str, listed: PassListing | None = None, *, recorded: ClaimRecord | None = None
    ) -> None:
        """One repair pass over a checkpointed claim, under the same locks as kubelet's calls.

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
            with self._managed.claim_then_pod(claim_uid, recorded.pod_uid):
                self._managed.release_managed_claim(claim_uid)
            return
        if listed is not None and self._healthy(recorded, listed):
            return
        live = self._managed.read_live(recorded.namespace, recorded.name, claim_uid)
        check_repairable(recorded, live)
        # The live Pod is the recorded one now: the same locks as kubelet's calls for it.
        with self._managed.claim_then_pod(claim_uid, recorded.pod_uid):
            current = self._checkpoint.snapshot_claim(claim_uid)
            if current is None or phases_of(current) & RELEASE_PHASES:
                return  # kubelet's release got the locks first
            self._managed.repair_forward(live, None if listed is None else listed.shadows)

    def _healthy(self, recorded: ClaimRecord, listed: PassListing) -> bool:
        """Nothing the live path would write: the listed objects and the claim's status.devices."""
        why = drift(recorded, listed, node_uid=self._node_uid)
        if why == HEALTHY:
            claim = (listed.claims or {})[recorded.claim_uid]  # drift has seen both
            pod = (listed.pods or {})[recorded.pod_uid]
            if self._managed.status_behind(claim, pod, own_bindings(listed, recorded)):
                why = "its status.devices is behind"
        if why != HEALTHY:
            log.debug(
                "claim %s/%s (%s) takes the live path: %s",
                recorded.namespace,
                recorded.name,
                recorded.claim_uid,
                why,
            )
        return why == HEALTHY


def check_repairable(recorded: ClaimRecord, live: LiveClaim) -> None:
    """Forward repair only for the recorded, live Pod and the recorded allocation."""
    where = f"claim {recorded.namespace}/{recorded.name} ({recorded.claim_uid})"
    pod = live.pod.get("metadata") or {}
    if pod.get("uid") != recorded.pod_uid:
        raise RepairStopped(
            reasons.POD_REPLACED,
            f"{where} is now reserved for Pod {pod.get('uid')}, recorded for {recorded.pod_uid}; repair "
            "stops and the VFs stay prepared until kubelet unprepares the claim",
        )
    if pod.get("deletionTimestamp"):
        raise RepairStopped(
            reasons.POD_TERMINATING,
            f"Pod {pod.get('namespace')}/{pod.get('name')} of {where} is terminating; its networks are not "
            "repaired, kubelet releases them on unprepare",
        )
    if sorted(live.devices) != sorted((d.pool, d.device) for d in recorded.devices):
        raise RepairStopped(
            reasons.ALLOCATION_CHANGED,
            f"{where} now allocates other devices than the prepared ones; repair stops, the prepared "
            "VFs stay as they are until kubelet unprepares the claim",
        )
