"""A listed shadow against its binding record, without a read of its own (spec 8.3: every repair
pass rechecks every binding, so a healthy one must be cheap).

A repair pass lists this node's shadows once and keeps of each only what decides convergence.
`converged` is deliberately narrower than the strict `check_shadow`: it says yes only for the
exact object the driver wrote (canonical binding text, same config bytes, recorded UID, our
finalizer and owner, not deleting), so anything else takes the ordinary read-and-repair path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, TypeAlias

from sriov_contract.errors import ReasonedError
from sriov_contract.keys import BINDING_ANNOTATION, PROTECTION_FINALIZER, shadow_labels
from sriov_dra.core.bindingrecord import BindingRecord


@dataclass(frozen=True)
class ListedShadow:
    """What a repair decision needs of one listed shadow; the config is kept only as a digest."""

    uid: str
    resource_version: str
    deleting: bool
    finalizers: tuple[str, ...]
    pod_owner_uids: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]
    binding_text: str | None
    config_digest: str | None


ShadowIndex: TypeAlias = Mapping[tuple[str, str], ListedShadow]
"""Listed shadows by (namespace, name)."""


def _digest(config: object) -> str | None:
    return hashlib.sha256(config.encode()).hexdigest() if isinstance(config, str) else None


def listed_shadow(obj: Mapping[str, Any]) -> ListedShadow:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    text = annotations.get(BINDING_ANNOTATION)
    return ListedShadow(
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        finalizers=tuple(str(f) for f in meta.get("finalizers") or []),
        pod_owner_uids=tuple(
            str(r.get("uid")) for r in meta.get("ownerReferences") or [] if r.get("kind") == "Pod"
        ),
        labels=tuple(sorted((str(k), str(v)) for k, v in (meta.get("labels") or {}).items())),
        binding_text=text if isinstance(text, str) else None,
        config_digest=_digest((obj.get("spec") or {}).get("config")),
    )


def index_shadows(objs: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], ListedShadow]:
    """One listing, consumed as it streams in, reduced to its repair-relevant facts."""
    out: dict[tuple[str, str], ListedShadow] = {}
    for obj in objs:
        meta = obj.get("metadata") or {}
        out[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = listed_shadow(obj)
    return out


def converged(listed: ListedShadow | None, record: BindingRecord) -> bool:
    """True only when the listed object is exactly this binding's live, protected shadow."""
    if listed is None or not record.shadow_uid or listed.uid != record.shadow_uid:
        return False
    if listed.deleting or PROTECTION_FINALIZER not in listed.finalizers:
        return False
    if listed.pod_owner_uids != (record.identity.pod_uid,):
        return False
    expected = _expected(record)
    if expected is None:
        return False  # an invalid record: the strict path reports it
    labels, text, digest = expected
    return labels.issubset(listed.labels) and listed.binding_text == text and listed.config_digest == digest


# Expectations kept: a node's worth of bindings (a repair pass checks each on every pass, and
# decoding hands it the same record object while the checkpoint is unchanged).
_EXPECTED_SHADOWS: Final = 16384


@lru_cache(maxsize=_EXPECTED_SHADOWS)
def _expected(record: BindingRecord) -> tuple[frozenset[tuple[str, str]], str, str | None] | None:
    """Our labels (others may add more), the binding text and the config digest of the shadow the
    driver writes for `record`; None for an invalid record."""
    labels = shadow_labels(record.identity.pod_uid, record.identity.claim_uid, record.identity.node_uid)
    try:
        text = record.binding().to_json()
    except ReasonedError:
        return None
    return frozenset(labels.items()), text, _digest(record.config)
