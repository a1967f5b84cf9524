"""A repair pass's listings against the checkpoint (spec 8.3: every pass rechecks every binding, so a
healthy claim must cost no request of its own): which claims need the per-claim live path.

A pass lists this node's Pods, the ResourceClaims and this node's shadows once (consistent reads,
no resourceVersion). A claim is healthy only when every fact the live path would check reads
back exactly as recorded: all bindings Ready, the claim still allocated the recorded devices and
reserved for the recorded Pod, that Pod live on this node and not terminating, every shadow the
exact object the driver wrote, and the Pod already selecting every Ready binding. Anything else,
including a listing that is missing, names the claim for the live path, which re-reads under the
claim's locks before it writes; a healthy verdict never writes anything, so a listing that went
stale meanwhile costs at most one pass of delay, never a wrong write.

The Pod's spec.resourceClaims is immutable and was verified against the claim when it was
prepared, so the same Pod UID is proof enough of that reference; an extended-resource claim is
controller-owned by that Pod UID, which is proof enough of its reference too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sriov_contract.errors import ReasonedError
from sriov_dra.core.bindingrecord import READY, BindingRecord, phases_of, records_of
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.selection import merge_managed_selections
from sriov_dra.core.shadowmatch import ShadowIndex, converged
from sriov_dra.model import DRIVER_NAME

HEALTHY: Final = ""


@dataclass(frozen=True)
class PassListing:
    """One pass's reads; a part is None when its listing was not made or failed."""

    shadows: ShadowIndex | None = None
    pods: Mapping[str, Mapping[str, Any]] | None = None
    """This node's Pods by UID, as the API server selected them by spec.nodeName (so a listed Pod
    is on this node), possibly metadata only."""
    claims: Mapping[str, Mapping[str, Any]] | None = None
    """ResourceClaims by UID."""
    node_uid: str | None = None
    """The Node's UID as read for this pass."""
    ready: Mapping[str, Sequence[BindingRecord]] | None = None
    """ready_bindings of the checkpoint as the pass began: each record decoded once per pass."""


def by_uid(objs: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str((o.get("metadata") or {}).get("uid") or ""): o for o in objs}


def ready_bindings(records: Iterable[ClaimRecord]) -> dict[str, list[BindingRecord]]:
    """Every binding of the all-Ready records, by Pod UID, in plan order: what each Pod must select."""
    out: dict[str, list[BindingRecord]] = {}
    for record in records:
        if phases_of(record) == {READY}:
            out.setdefault(record.pod_uid, []).extend(_bindings(record))
    for bindings in out.values():
        bindings.sort(key=lambda b: b.plan_index)
    return out


def own_bindings(listing: PassListing, record: ClaimRecord) -> list[BindingRecord]:
    """The record's bindings as the pass decoded them (none when it was corrupt, or is newer)."""
    pod = (listing.ready or {}).get(record.pod_uid, ())
    return [b for b in pod if b.identity.claim_uid == record.claim_uid]


def drift(record: ClaimRecord, listing: PassListing, *, node_uid: str) -> str:
    """HEALTHY, or why `record` (the checkpoint's record now) takes the live path. Only for records
    with managed bindings: an unmanaged one has nothing to repair."""
    phases = phases_of(record)
    if phases != {READY}:
        return f"bindings are {'/'.join(sorted(phases))}"
    if listing.pods is None or listing.claims is None or listing.shadows is None or listing.ready is None:
        return "this pass has no complete listing"
    if listing.node_uid != node_uid:
        return f"the Node reads as UID {listing.node_uid}"
    claim = listing.claims.get(record.claim_uid)
    if claim is None:
        return "the claim is not listed"
    why = _claim_drift(record, claim)
    if why:
        return why
    pod = listing.pods.get(record.pod_uid)
    if pod is None:
        return "its Pod is not listed on this node"
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return "its Pod is terminating"
    # Its node is not checked here: the listing's field selector did that on the API server, and
    # the spec it would be read from may not be listed at all.
    bindings = own_bindings(listing, record)
    if not bindings:
        return "its record is unreadable, or newer than this pass"
    for binding in bindings:
        if not converged(listing.shadows.get((binding.pod_namespace, binding.shadow_name)), binding):
            return f"shadow {binding.pod_namespace}/{binding.shadow_name} differs"
    try:
        ops = merge_managed_selections(pod, [b.managed_selection() for b in listing.ready[record.pod_uid]])
    except ReasonedError as exc:
        return f"the Pod's selections conflict: {exc.reason}"
    return "the Pod's selections are incomplete" if ops is not None else HEALTHY


def _bindings(record: ClaimRecord) -> list[BindingRecord]:
    """The record's bindings, or none when it is corrupt (the live path reports that)."""
    try:
        return [b for _d, b in records_of(record)]
    except ReasonedError:
        return []


def _claim_drift(record: ClaimRecord, claim: Mapping[str, Any]) -> str:
    status = claim.get("status") or {}
    reserved = status.get("reservedFor") or []
    if [(r.get("apiGroup") or "", r.get("resource"), r.get("uid")) for r in reserved] != [
        ("", "pods", record.pod_uid)
    ]:
        return "the claim's reservation changed"
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    allocated = sorted(
        (str(r.get("pool")), str(r.get("device"))) for r in results if r.get("driver") == DRIVER_NAME
    )
    if allocated != sorted((d.pool, d.device) for d in record.devices):
        return "the claim's allocation changed"
    return HEALTHY
