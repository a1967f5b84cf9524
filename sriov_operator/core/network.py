"""The network controller's decision for one SriovNetwork (pure): which NAD write, which Ready.

Level-triggered: given the CR, the live NAD at its target and whether the target namespace
exists, decide create / update / nothing and the Ready condition. A NAD is rewritten only when
its config, our two annotations or the SriovNetwork ownerReference differ, so an unchanged NAD
keeps its resourceVersion across resyncs and driver prepares (spec 17.4).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sriov_operator.core.keys import GROUP, OWNER_REF_ANNOTATION
from sriov_operator.core.sourcenad import (
    config_matches,
    describe,
    desired_nad,
    namespace_problem,
    owner_marker,
    target_of,
)
from sriov_operator.reasons import NAD_INVALID, NAMESPACE_NOT_FOUND, NETWORK_READY, OperatorError

MARKER_PREFIX = f"SriovNetwork.{GROUP}/"


@dataclass(frozen=True)
class NetworkDecision:
    """What to write for one SriovNetwork and the Ready condition to report once it succeeded."""

    write: Literal["none", "create", "update"]
    status: Literal["True", "False"]
    reason: str
    message: str
    body: dict[str, Any] = field(default_factory=dict)


def _owner_refs_current(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    want = desired["metadata"].get("ownerReferences") or []
    have = [
        r
        for r in (existing.get("metadata") or {}).get("ownerReferences") or []
        if r.get("kind") == "SriovNetwork"
    ]
    return [(r.get("name"), r.get("uid")) for r in have] == [(r["name"], r["uid"]) for r in want]


def _merged(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The existing NAD with only our fields replaced: other annotations, labels, finalizers and
    ownerReferences stay; resourceVersion makes the update fail rather than overwrite a change."""
    out = copy.deepcopy(dict(existing))
    md = out.setdefault("metadata", {})
    md.setdefault("annotations", {}).update(desired["metadata"]["annotations"])
    others = [r for r in md.get("ownerReferences") or [] if r.get("kind") != "SriovNetwork"]
    refs = others + list(desired["metadata"].get("ownerReferences") or [])
    if refs:
        md["ownerReferences"] = refs
    else:
        md.pop("ownerReferences", None)
    out["spec"] = copy.deepcopy(desired["spec"])
    return out


def plan_network(
    network: Mapping[str, Any],
    existing: Mapping[str, Any] | None,
    *,
    namespace_exists: bool,
    operator_namespace: str,
    prefix: str,
) -> NetworkDecision:
    problem = namespace_problem(network, operator_namespace)
    if problem:
        return NetworkDecision("none", "False", NAD_INVALID, problem)
    try:
        desired = desired_nad(network, prefix)
    except OperatorError as exc:
        return NetworkDecision("none", "False", exc.reason, exc.message)
    namespace, name = target_of(network)
    ready = f"NetworkAttachmentDefinition {namespace}/{name} is provisioned and ready"
    if existing is None:
        if not namespace_exists:
            return NetworkDecision(
                "none",
                "False",
                NAMESPACE_NOT_FOUND,
                f"{describe(network)}: target namespace {namespace} does not exist; create it (the NAD "
                "follows automatically)",
            )
        return NetworkDecision("create", "True", NETWORK_READY, ready, desired)
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    marker = annotations.get(OWNER_REF_ANNOTATION)
    if marker and marker != owner_marker(network):
        return NetworkDecision(
            "none",
            "False",
            NAD_INVALID,
            f"NetworkAttachmentDefinition {namespace}/{name} already exists and is owned by {marker}; "
            f"rename {describe(network)} or remove the other owner",
        )
    if not marker:
        # Upstream takes over a NAD without a marker; we do not: it may be an administrator's own.
        return NetworkDecision(
            "none",
            "False",
            NAD_INVALID,
            f"NetworkAttachmentDefinition {namespace}/{name} already exists and was not created by the "
            f"operator (no {OWNER_REF_ANNOTATION} annotation); delete it or rename {describe(network)}",
        )
    if (existing.get("metadata") or {}).get("deletionTimestamp"):
        return NetworkDecision(
            "none",
            "False",
            NAD_INVALID,
            f"NetworkAttachmentDefinition {namespace}/{name} is being deleted; "
            "it is recreated once it is gone",
        )
    current = (
        config_matches(existing, desired["spec"]["config"])
        and all(annotations.get(k) == v for k, v in desired["metadata"]["annotations"].items())
        and _owner_refs_current(existing, desired)
    )
    if current:
        return NetworkDecision("none", "True", NETWORK_READY, ready)
    return NetworkDecision("update", "True", NETWORK_READY, ready, _merged(existing, desired))


def obsolete_nads(
    nads: Iterable[Mapping[str, Any]], networks: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """NADs carrying our owner marker that no current SriovNetwork stands for: their CR is gone or
    now targets another namespace. Deleting these replaces upstream's finalizer and
    last-network-namespace annotation with one level-triggered rule."""
    wanted = {(owner_marker(n), target_of(n)) for n in networks}
    out = []
    for nad in nads:
        md = nad.get("metadata") or {}
        marker = str((md.get("annotations") or {}).get(OWNER_REF_ANNOTATION) or "")
        if not marker.startswith(MARKER_PREFIX) or md.get("deletionTimestamp"):
            continue
        if (marker, (str(md.get("namespace")), str(md.get("name")))) not in wanted:
            out.append(nad)
    return out
