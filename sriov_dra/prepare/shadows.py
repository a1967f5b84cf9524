"""The shadow NAD's API steps: create or adopt it (EnsureShadow; every shadow of a claim at once,
their UIDs persisted in one checkpoint write), request its deletion, and drop our finalizer once
released (FinalizeReleasedShadow).

What a shadow must look like, and the checks of a live one against its record, are pure and live
in sriov_dra.core.shadowspec: each step here reads the object, has it checked there, then writes.
A shadow is only ever touched after its full identity and frozen content were verified: the
deterministic name is a truncated hash, so a name match alone proves nothing, and an object
someone else created under that name is never overwritten, adopted or finalized.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Final, TypeVar

from sriov_contract.keys import PROTECTION_FINALIZER
from sriov_dra import reasons
from sriov_dra.apierrors import ApiError
from sriov_dra.core.bindingrecord import PENDING, BindingRecord, records_of
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.shadowmatch import ShadowIndex, converged
from sriov_dra.core.shadowspec import (
    ShadowError,
    check_shadow,
    drop_protection_patch,
    finalizers_of,
    is_deleting,
    restore_owned_patch,
    restore_protection_patch,
    shadow_conflict,
    shadow_object,
    uid_of,
)
from sriov_dra.ports import NadClient
from sriov_dra.prepare.crashpoints import crash_point
from sriov_dra.state.checkpoint import PreparedClaims

FINALIZER_ATTEMPTS: Final = 6
# Shadow requests in flight at once: enough to hide the API round trip, few enough for the
# client's connection pool and a busy API server (16 or 32 made no 32-VF prepare faster on a
# 2-core node: the API server is the bound, and the client opened connections beyond its pool).
SHADOW_WORKERS: Final = 8

_T = TypeVar("_T")

log = logging.getLogger(__name__)


def ensure_shadow(
    nads: NadClient,
    record: BindingRecord,
    forget_uid: Callable[[BindingRecord], BindingRecord],
    *,
    restore: bool = False,
) -> str:
    """Create the shadow, or adopt the one a lost Create left; returns its UID.

    A recorded shadow that vanished is recreated from the frozen bytes, but only after
    `forget_uid` durably cleared the old UID: otherwise a lost response to this Create would
    leave a recorded UID that can never match again. With `restore` (repair), the recorded shadow's
    edited config, labels or binding are put back from the record first (ShadowRestored); kubelet's
    prepare refuses such a shadow instead, leaving the repair to the worker.
    """
    existing = nads.get_nad(record.pod_namespace, record.shadow_name) if record.shadow_uid else None
    if existing is None:
        if record.shadow_uid:
            record = forget_uid(record)
        try:
            return uid_of(nads.create_nad(shadow_object(record)))
        except ApiError as exc:
            # 409 AlreadyExists, or no answer: look at what is there before deciding anything.
            if exc.status != 409 and not exc.outcome_unknown:
                raise
            existing = nads.get_nad(record.pod_namespace, record.shadow_name)
            if existing is None:
                raise
    restored = restore_owned_patch(existing, record) if restore else None
    if restored is not None:
        log.warning(
            "%s: shadow %s/%s of claim %s was edited (config, labels or binding); the driver's bytes are "
            "put back. deploy/base/admission/ policies refuse such edits",
            reasons.SHADOW_RESTORED,
            record.pod_namespace,
            record.shadow_name,
            record.identity.claim_uid,
        )
        existing = nads.patch_nad(record.pod_namespace, record.shadow_name, restored)
    check_shadow(existing, record, releasing=False)
    if is_deleting(existing):
        raise ShadowError(
            reasons.SHADOW_DELETION_PENDING,
            f"shadow {record.pod_namespace}/{record.shadow_name} of claim {record.identity.claim_uid} is "
            "being deleted while its Pod still uses it; it is not recreated. Delete and recreate the Pod",
            name=record.shadow_name,
        )
    if PROTECTION_FINALIZER not in finalizers_of(existing):
        existing = nads.patch_nad(
            record.pod_namespace, record.shadow_name, restore_protection_patch(existing)
        )
    return uid_of(existing)


def ensure_claim_shadows(
    nads: NadClient,
    checkpoint: PreparedClaims,
    pool: ThreadPoolExecutor,
    recorded: ClaimRecord,
    listed: ShadowIndex | None,
    *,
    restore: bool = False,
) -> list[BindingRecord]:
    """Ensure every shadow of the claim, the missing ones created in parallel on `pool`; then persist
    every newly observed UID in one checkpoint write. A shadow `listed` exactly as recorded costs no
    request. A failure keeps what the others achieved: their UIDs are persisted before the first
    failure (in plan order) is raised. `restore`: see ensure_shadow."""
    claim_uid = recorded.claim_uid
    bindings = [(d.device, b) for d, b in records_of(recorded)]
    todo = [
        (device, b)
        for device, b in bindings
        if listed is None or not converged(listed.get((b.pod_namespace, b.shadow_name)), b)
    ]
    outcomes = _in_parallel(
        pool, [partial(_ensure_one, nads, checkpoint, claim_uid, d, b, restore=restore) for d, b in todo]
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
        checkpoint.update_managed_bindings(claim_uid, {d: b.to_json() for d, b in observed.items()})
    if todo:
        crash_point("prepare-shadow")
    failed = next((o for o in outcomes if isinstance(o, Exception)), None)
    if failed is not None:
        raise failed
    return [ensured[device] for device, _b in bindings]


def _ensure_one(
    nads: NadClient,
    checkpoint: PreparedClaims,
    claim_uid: str,
    device: str,
    binding: BindingRecord,
    *,
    restore: bool,
) -> tuple[BindingRecord, str]:
    """The binding as it now stands (a vanished shadow's UID forgotten) and its shadow's UID."""
    current = binding

    def forget(old: BindingRecord) -> BindingRecord:
        nonlocal current
        # Back to Pending: the binding is not whole again until the Pod names the new UID.
        current = old.with_shadow_uid("").with_phase(PENDING)
        checkpoint.update_managed_bindings(claim_uid, {device: current.to_json()})
        return current

    uid = ensure_shadow(nads, binding, forget, restore=restore)
    return current, uid


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


def request_shadow_deletion(nads: NadClient, record: BindingRecord) -> str:
    """Release steps 1-2: verify the recorded (or adoptable) shadow and delete it by UID.

    Returns the shadow's UID, or "" when it is already gone. Deletion only marks the object while
    our finalizer is on it; nothing waits for it to disappear. The recorded shadow (its UID is the
    one the driver created) goes whatever was done to its content: an edited config must not keep
    its Pod Terminating. Only an object the record cannot vouch for gets the full check.
    """
    obj = nads.get_nad(record.pod_namespace, record.shadow_name)
    if obj is None:
        return ""
    if not record.shadow_uid or uid_of(obj) != record.shadow_uid:
        check_shadow(obj, record, releasing=True)
    uid = uid_of(obj)
    if not is_deleting(obj):
        nads.delete_nad(record.pod_namespace, record.shadow_name, uid)
    return uid


def finalize_released_shadow(
    nads: NadClient,
    record: BindingRecord,
    uid: str,
    *,
    attempts: int = FINALIZER_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Release step 7-8: drop only our finalizer from the exact shadow, keeping everyone else's."""
    for attempt in range(attempts):
        obj = nads.get_nad(record.pod_namespace, record.shadow_name)
        if obj is None:
            return
        if uid_of(obj) != uid:
            raise shadow_conflict(record, f"it was replaced (UID {uid_of(obj)}, released {uid})")
        if not is_deleting(obj):
            nads.delete_nad(record.pod_namespace, record.shadow_name, uid)
            continue
        finalizers = finalizers_of(obj)
        if PROTECTION_FINALIZER not in finalizers:
            return
        ops = drop_protection_patch(obj)
        try:
            nads.patch_nad(record.pod_namespace, record.shadow_name, ops)
            return
        except ApiError as exc:
            # A NotFound answer is confirmed by the next read: the record is forgotten right after
            # this, so a finalizer trusted gone but still there would never be removed.
            if exc.status != 404 and not exc.retryable:
                raise
        sleep(min(0.05 * 2**attempt, 1.0))
    raise ShadowError(
        reasons.FINALIZER_REMOVAL_RETRIES_EXHAUSTED,
        f"could not remove {PROTECTION_FINALIZER} from {record.pod_namespace}/{record.shadow_name} after "
        f"{attempts} attempts (it kept changing); the release is retried by kubelet",
        name=record.shadow_name,
    )
