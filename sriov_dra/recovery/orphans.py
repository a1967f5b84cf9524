"""The orphan scan (spec 8.5, 18.3: a protected shadow without a checkpoint record is reported, never
finalized on its own): this node's managed shadows correlated with the checkpoint.

Labels only narrow the listing; ownership is decided by the full binding identity and the frozen
content, exactly as release checks them. Given a checkpoint reader, the scan reads the checkpoint
only once the API server has taken the listing's snapshot: prepare records a binding before it
creates the shadow, so a binding prepared during the scan can never look like an orphan (at worst
one released meanwhile does, and its shadow is already gone). A protected shadow that no checkpoint record accounts
for is an orphan: it is reported, never finalized automatically, because a lost checkpoint does
not prove the VF and its network are no longer in use. Shadows of other node UIDs are ignored.
An operator may finalize one orphan by its exact attachment ID; that removes only our finalizer,
under UID and resourceVersion preconditions, and leaves every foreign finalizer in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sriov_contract.binding import Binding, parse_binding
from sriov_contract.errors import ReasonedError
from sriov_contract.keys import BINDING_ANNOTATION, NODE_UID_LABEL, PROTECTION_FINALIZER
from sriov_dra import reasons
from sriov_dra.apierrors import ApiError
from sriov_dra.core.bindingrecord import BindingRecord, records_of
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.shadowspec import (
    ShadowError,
    check_shadow,
    drop_protection_patch,
    finalizers_of,
    is_deleting,
    uid_of,
)
from sriov_dra.ports import NadClient, ShadowLister

ORPHAN: Final = "Orphan"
CONFLICT: Final = reasons.CONFLICT


class OrphanError(ReasonedError):
    """An orphan cannot be finalized as asked."""


@dataclass(frozen=True)
class ShadowReport:
    namespace: str
    name: str
    uid: str
    attachment_id: str
    pod_uid: str
    claim_uid: str
    status: str
    """The checkpoint phase of an accounted shadow, Orphan, or Conflict (recorded, but not exact)."""
    protected: bool
    foreign_finalizers: tuple[str, ...]
    deleting: bool
    detail: str = ""

    @property
    def orphan(self) -> bool:
        return self.status == ORPHAN

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "attachmentID": self.attachment_id,
            "podUID": self.pod_uid,
            "claimUID": self.claim_uid,
            "status": self.status,
            "protected": self.protected,
            "foreignFinalizers": list(self.foreign_finalizers),
            "deleting": self.deleting,
            "detail": self.detail,
        }


def checkpoint_bindings(records: Sequence[ClaimRecord]) -> dict[str, BindingRecord]:
    """Every managed binding of the checkpoint, by attachment ID (corrupt records are skipped:
    the agent refuses them loudly on its own)."""
    out: dict[str, BindingRecord] = {}
    for record in records:
        try:
            out.update((b.attachment_id, b) for _d, b in records_of(record))
        except ReasonedError:
            continue
    return out


@dataclass(frozen=True)
class _Known:
    by_attachment: Mapping[str, BindingRecord]
    by_place: Mapping[tuple[str, str], BindingRecord]
    """The same records by (namespace, shadow name): where each one's shadow must be."""

    @classmethod
    def of(cls, records: Sequence[ClaimRecord]) -> _Known:
        known = checkpoint_bindings(records)
        return cls(known, {(b.pod_namespace, b.shadow_name): b for b in known.values()})

    def binding(self, meta: Mapping[str, Any]) -> tuple[Binding, BindingRecord | None, Binding | None]:
        """The shadow's binding, the record holding it and that record's own binding. The driver
        wrote the annotation as its record's canonical text, so one string comparison with that
        text proves what the strict parse would return; anything else (edited, foreign,
        re-encoded) is parsed strictly."""
        text = str((meta.get("annotations") or {}).get(BINDING_ANNOTATION, ""))
        record = self.by_place.get((str(meta.get("namespace", "")), str(meta.get("name", ""))))
        expected = _canonical(record) if record is not None else None
        if expected is not None and text == expected.to_json():
            return expected, record, expected
        binding = parse_binding(text)
        return binding, self.by_attachment.get(binding.attachment_id), None


def _canonical(record: BindingRecord) -> Binding | None:
    try:
        return record.binding()
    except ReasonedError:
        return None  # an invalid record: the strict path reports it as it always did


def correlate(
    shadows: Iterable[Mapping[str, Any]], records: Sequence[ClaimRecord], node_uid: str
) -> list[ShadowReport]:
    known = _Known.of(records)
    reports = []
    for obj in shadows:
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(NODE_UID_LABEL) != node_uid:
            continue
        reports.append(_report(obj, known, node_uid))
    return sorted(reports, key=lambda r: (r.namespace, r.name))


def _report(obj: Mapping[str, Any], known: _Known, node_uid: str) -> ShadowReport:
    meta = obj.get("metadata") or {}
    finalizers = finalizers_of(obj)
    attachment, pod_uid, claim_uid, status, detail = "", "", "", ORPHAN, ""
    try:
        binding, record, expected = known.binding(meta)
        attachment, pod_uid, claim_uid = binding.attachment_id, binding.pod_uid, binding.claim_uid
        if binding.node_uid != node_uid:
            raise ReasonedError(reasons.OTHER_NODE, f"its binding names node UID {binding.node_uid}")
        if record is None:
            detail = "no checkpoint record on this node holds this binding"
        else:
            check_shadow(obj, record, releasing=True, binding=binding, expected=expected)
            status = record.phase
    except ShadowError as exc:
        status, detail = CONFLICT, exc.message
    except ReasonedError as exc:
        detail = f"unreadable binding: {exc.message}"
    return ShadowReport(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=uid_of(obj),
        attachment_id=attachment,
        pod_uid=pod_uid,
        claim_uid=claim_uid,
        status=status,
        protected=PROTECTION_FINALIZER in finalizers,
        foreign_finalizers=tuple(f for f in finalizers if f != PROTECTION_FINALIZER),
        deleting=is_deleting(obj),
        detail=detail,
    )


Records = Sequence[ClaimRecord] | Callable[[], Sequence[ClaimRecord]]
"""The checkpoint's records, or a reader of them (called once the listing has started)."""


def scan(lister: ShadowLister, records: Records, node_uid: str) -> list[ShadowReport]:
    """Each shadow is checked as the listing streams in and only its small report is kept; the
    checkpoint is read and indexed while the API server sends the listing."""
    shadows = lister.list_shadows(node_uid)
    return correlate(shadows, records() if callable(records) else records, node_uid)


def finalize_orphan(
    lister: ShadowLister, nads: NadClient, records: Records, node_uid: str, attachment_id: str
) -> ShadowReport:
    """Delete (UID precondition) and drop only our finalizer from the one orphan with this exact ID.

    Returns the orphan's report as it was before; foreign finalizers stay and are reported.
    """
    matches = [r for r in scan(lister, records, node_uid) if r.attachment_id == attachment_id]
    if len(matches) != 1 or not matches[0].orphan:
        state = "no shadow of this node has it" if not matches else f"its shadow is {matches[0].status}"
        raise OrphanError(
            reasons.NOT_AN_ORPHAN,
            f"attachment {attachment_id!r}: {state}; only an orphan named by its full attachment ID (see "
            "'sriov-dra orphans') can be finalized. Active and releasing bindings are kubelet's to release",
        )
    orphan = matches[0]
    obj = nads.get_nad(orphan.namespace, orphan.name)
    if obj is None:
        return orphan
    if uid_of(obj) != orphan.uid:
        raise OrphanError(
            reasons.SHADOW_REPLACED,
            f"{orphan.namespace}/{orphan.name} was replaced (UID {uid_of(obj)}, scanned {orphan.uid}); "
            "scan again",
        )
    if not is_deleting(obj):
        nads.delete_nad(orphan.namespace, orphan.name, orphan.uid)
        obj = nads.get_nad(orphan.namespace, orphan.name)
    if obj is not None and PROTECTION_FINALIZER in finalizers_of(obj):
        try:
            nads.patch_nad(orphan.namespace, orphan.name, drop_protection_patch(obj))
        except ApiError as exc:
            if exc.status != 404:
                raise OrphanError(
                    reasons.FINALIZE_FAILED,
                    f"{orphan.namespace}/{orphan.name} changed while finalizing ({exc.message}); scan again",
                ) from exc
    return orphan
