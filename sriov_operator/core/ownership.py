"""Which generated objects are ours, and how one of ours is brought to what is desired.

An object is ours when it carries the generated-by label and either our SriovOperatorConfig as
controller owner or no controller owner (upstream adopts the latter). An object of a desired name
that is not ours is never changed, adopted or deleted. Ours is rewritten only when it differs, and
then keeps everyone else's labels and non-controller owners.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from sriov_operator.core.keys import (
    API_VERSION,
    GENERATED_BY_LABEL,
    GENERATED_BY_VALUE,
    NODE_LABEL,
    NODE_POLICY_UID_LABEL,
    OPERATOR_CONFIG_NAME,
    RESOURCE_POOL_LABEL,
)


def _md(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def owner_reference(config: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "SriovOperatorConfig",
        "name": OPERATOR_CONFIG_NAME,
        "uid": str(_md(config).get("uid", "")),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_ours(obj: Mapping[str, Any], config: Mapping[str, Any] | None) -> bool:
    md = _md(obj)
    if (md.get("labels") or {}).get(GENERATED_BY_LABEL) != GENERATED_BY_VALUE:
        return False
    controllers = [r for r in md.get("ownerReferences") or [] if r.get("controller")]
    if not controllers:
        return True
    ref = controllers[0]
    if ref.get("kind") != "SriovOperatorConfig" or ref.get("name") != OPERATOR_CONFIG_NAME:
        return False
    # With the config gone, GC deletes what it owned anyway; any default-config owner is ours.
    return config is None or bool(ref.get("uid") == _md(config).get("uid"))


def differs(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    md, want = _md(existing), desired["metadata"]
    labels = md.get("labels") or {}
    if any(labels.get(k) != v for k, v in want["labels"].items()) or (
        RESOURCE_POOL_LABEL in labels and RESOURCE_POOL_LABEL not in want["labels"]
    ):
        return True
    controllers = [r for r in md.get("ownerReferences") or [] if r.get("controller")]
    return bool(controllers != want["ownerReferences"] or existing.get("spec") != desired["spec"])


def update_body(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(existing))
    md = out.setdefault("metadata", {})
    labels = {
        k: v
        for k, v in (md.get("labels") or {}).items()
        if k not in (RESOURCE_POOL_LABEL, NODE_POLICY_UID_LABEL, NODE_LABEL)
    }
    labels.update(desired["metadata"]["labels"])
    md["labels"] = labels
    others = [r for r in md.get("ownerReferences") or [] if not r.get("controller")]
    md["ownerReferences"] = list(desired["metadata"]["ownerReferences"]) + others
    out["spec"] = copy.deepcopy(desired["spec"])
    return out
