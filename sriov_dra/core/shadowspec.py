"""What a shadow NAD must look like: its object built from scratch, and checks of a live one against its record (pure).

A shadow is only ever touched after its full identity and frozen content were verified: the
deterministic name is a truncated hash, so a name match alone proves nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sriov_contract.binding import Binding, parse_binding
from sriov_contract.errors import ReasonedError
from sriov_contract.keys import (
    BINDING_ANNOTATION,
    DEVICE_INFO_ANNOTATION,
    PROTECTION_FINALIZER,
    shadow_labels,
)
from sriov_dra import reasons
from sriov_dra.core.bindingrecord import BindingRecord
from sriov_dra.core.selection import json_pointer

NAD_API_VERSION: Final = "k8s.cni.cncf.io/v1"


NAD_KIND: Final = "NetworkAttachmentDefinition"


class ShadowError(ReasonedError):
    """A shadow NAD cannot be created, adopted or released as recorded."""


def owner_reference(record: BindingRecord) -> dict[str, Any]:
    # blockOwnerDeletion false: our finalizer must never hold up foreground deletion of the Pod,
    # and true would need pods/finalizers rights; no controller: the Pod does not manage NADs.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": record.pod_name,
        "uid": record.identity.pod_uid,
        "blockOwnerDeletion": False,
    }


def shadow_object(record: BindingRecord) -> dict[str, Any]:
    """The complete shadow for its initial Create: protection and provenance from the first instant."""
    return {
        "apiVersion": NAD_API_VERSION,
        "kind": NAD_KIND,
        "metadata": {
            "name": record.shadow_name,
            "namespace": record.pod_namespace,
            "labels": shadow_labels(
                record.identity.pod_uid, record.identity.claim_uid, record.identity.node_uid
            ),
            "annotations": record.annotations(),
            "ownerReferences": [owner_reference(record)],
            "finalizers": [PROTECTION_FINALIZER],
        },
        "spec": {"config": record.config},
    }


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def uid_of(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("uid") or "")


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def finalizers_of(obj: Mapping[str, Any]) -> list[str]:
    return [str(f) for f in _meta(obj).get("finalizers") or []]


def shadow_conflict(record: BindingRecord, why: str) -> ShadowError:
    """The refusal to touch an object that is not exactly this binding's shadow, saying `why`."""
    return ShadowError(
        reasons.SHADOW_CONFLICT,
        f"NetworkAttachmentDefinition {record.pod_namespace}/{record.shadow_name} is not the shadow of "
        f"attachment {record.attachment_id} (claim {record.identity.claim_uid}, device "
        f"{record.identity.device}): {why}. The driver does not modify it; inspect and remove the object "
        "or recreate the workload",
        name=record.shadow_name,
        namespace=record.pod_namespace,
    )


def check_shadow(
    obj: Mapping[str, Any],
    record: BindingRecord,
    *,
    releasing: bool,
    binding: Binding | None = None,
    expected: Binding | None = None,
) -> None:
    """Refuse unless `obj` is exactly this binding's shadow (labels, binding, config, owner).

    `binding` is the object's already-parsed binding annotation and `expected` is
    `record.binding()`, when the caller has them: the orphan scan needs both for every shadow to
    find its record, and building them again here was the largest single cost of a scan.
    """
    meta = _meta(obj)
    if (meta.get("namespace"), meta.get("name")) != (record.pod_namespace, record.shadow_name):
        raise shadow_conflict(record, "it has another namespace or name")
    if record.shadow_uid and uid_of(obj) != record.shadow_uid:
        raise shadow_conflict(record, f"its UID {uid_of(obj)} is not the recorded {record.shadow_uid}")
    expected_labels = shadow_labels(
        record.identity.pod_uid, record.identity.claim_uid, record.identity.node_uid
    )
    labels = meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in expected_labels.items()):
        raise shadow_conflict(record, "its managed labels differ")
    text = (meta.get("annotations") or {}).get(BINDING_ANNOTATION)
    if not isinstance(text, str):
        raise shadow_conflict(record, f"it has no {BINDING_ANNOTATION} annotation")
    try:
        if binding is None:
            binding = parse_binding(text)
        binding.verify_identity(record.identity)
    except ReasonedError as exc:
        raise shadow_conflict(record, exc.message) from exc
    if binding != (expected or record.binding()):
        raise shadow_conflict(
            record, "its binding annotation records another source, PCI address or interface"
        )
    info = record.device_info()
    if (meta.get("annotations") or {}).get(DEVICE_INFO_ANNOTATION) != (info.to_json() if info else None):
        raise shadow_conflict(record, f"its {DEVICE_INFO_ANNOTATION} annotation differs from the frozen one")
    if (obj.get("spec") or {}).get("config") != record.config:
        raise shadow_conflict(record, "its spec.config differs from the frozen configuration")
    pods = [r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Pod"]
    if any(r.get("uid") != record.identity.pod_uid for r in pods):
        raise shadow_conflict(record, "it is owned by another Pod")
    # Orphan propagation may legitimately strip the reference while the Pod is being deleted.
    if not pods and not releasing:
        raise shadow_conflict(record, f"it has no ownerReference to Pod {record.identity.pod_uid}")


def _set_finalizers(obj: Mapping[str, Any], finalizers: list[str]) -> list[dict[str, Any]]:
    """A JSON Patch replacing the whole finalizer list, valid only against this exact object version."""
    meta = _meta(obj)
    return [
        {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
        {"op": "add", "path": json_pointer("metadata", "finalizers"), "value": finalizers},
    ]


def drop_protection_patch(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Remove only our finalizer, keeping everyone else's, from exactly this version of `obj`."""
    return _set_finalizers(obj, [f for f in finalizers_of(obj) if f != PROTECTION_FINALIZER])


def restore_owned_patch(obj: Mapping[str, Any], record: BindingRecord) -> list[dict[str, Any]] | None:
    """Put back what the driver wrote into the recorded shadow: spec.config, the managed labels and
    the binding annotation, from the frozen record, never from the object; None when they are intact
    or the object is not the recorded shadow (its UID is the proof the driver created it: an object
    someone else made under the name is never rewritten).

    The edit is never adopted: the CNI guard would refuse the edited bytes, and the Pod's release
    needs its shadow as recorded."""
    meta = _meta(obj)
    if not record.shadow_uid or uid_of(obj) != record.shadow_uid:
        return None
    expected_labels = shadow_labels(
        record.identity.pod_uid, record.identity.claim_uid, record.identity.node_uid
    )
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    ours = record.annotations()
    config = (obj.get("spec") or {}).get("config")
    if (
        config == record.config
        and all(labels.get(k) == v for k, v in expected_labels.items())
        and all(annotations.get(k) == v for k, v in ours.items())
    ):
        return None
    return [
        {"op": "test", "path": "/metadata/uid", "value": meta.get("uid")},
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
        {
            "op": "add",
            "path": json_pointer("spec"),
            "value": {**(obj.get("spec") or {}), "config": record.config},
        },
        {"op": "add", "path": json_pointer("metadata", "labels"), "value": {**labels, **expected_labels}},
        {
            "op": "add",
            "path": json_pointer("metadata", "annotations"),
            "value": {**annotations, **ours},
        },
    ]


def restore_protection_patch(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Add our finalizer back after everyone else's, to exactly this version of `obj`."""
    return _set_finalizers(obj, [*finalizers_of(obj), PROTECTION_FINALIZER])
