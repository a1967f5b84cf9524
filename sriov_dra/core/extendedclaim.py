"""A Pod's extended-resource claim (DRAExtendedResource, KEP-5004; spec 19.2 item 7): how the
consumer of a claim the scheduler made for `resources.limits` is reached and checked.

A Pod that asks for `openshift.io/sriov_vfs: 2` names no claim. The scheduler creates one claim for
all of the Pod's extended resources (annotated `resource.kubernetes.io/extended-resource-claim:
"true"`, controller-owned by the Pod) and writes its name to the Pod's
`status.extendedResourceClaimStatus.resourceClaimName`; the kubelet prepares it like any other.
So that status field, not `spec.resourceClaims`, is the Pod's reference to it, and the Pod's
ownership replaces the reference check a template claim gets. What stays unsupported: an
annotated claim reached through `spec.resourceClaims`, and a claim reached both ways, since
neither is what the scheduler makes and both would let one claim be counted twice.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from sriov_dra.reasons import CLAIM_NOT_OWNED_BY_POD, UNSUPPORTED_MANAGED_CLAIM_KIND

EXTENDED_RESOURCE_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
EXTENDED_ALIAS: Final = "~extended-resources"
"""The alias interface numbering sorts the extended-resource claim under: never a valid Pod claim
name (those are DNS labels), and after all of them, so explicit claims keep dra0, dra1, ..."""

Refusal = tuple[str, str]
"""(reason, why) for the caller to raise in its own error type."""


def is_extended_resource_claim(claim: Mapping[str, Any]) -> bool:
    """The scheduler made this claim for extended resources (its annotation's one valid value)."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return annotations.get(EXTENDED_RESOURCE_ANNOTATION) == "true"


def extended_claim_name(pod: Mapping[str, Any]) -> str:
    """The name of the Pod's extended-resource claim; empty when the Pod has none (yet)."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    return str(status.get("resourceClaimName") or "")


def is_for_pod(pod: Mapping[str, Any], claim: Mapping[str, Any]) -> bool:
    """resourceclaim.IsForPod(pod, claim, false): same namespace and the Pod is the controller owner."""
    pmeta, cmeta = pod.get("metadata") or {}, claim.get("metadata") or {}
    return pmeta.get("namespace") == cmeta.get("namespace") and any(
        r.get("controller") and r.get("uid") == pmeta.get("uid") for r in cmeta.get("ownerReferences") or []
    )


def reached_both_ways(pod: Mapping[str, Any], spec_claim_names: Collection[str]) -> Refusal | None:
    """The Pod's extended-resource claim must not also be one of its spec.resourceClaims."""
    name = extended_claim_name(pod)
    if name and name in spec_claim_names:
        return (
            UNSUPPORTED_MANAGED_CLAIM_KIND,
            f"Pod {(pod.get('metadata') or {}).get('name')} uses claim {name} both through "
            "spec.resourceClaims and as its extended-resource claim; use one or the other",
        )
    return None


def check_spec_claim(claim: Mapping[str, Any]) -> Refusal | None:
    """A claim reached through spec.resourceClaims is an ordinary one, not the scheduler's."""
    if is_extended_resource_claim(claim):
        return (
            UNSUPPORTED_MANAGED_CLAIM_KIND,
            "it was created for an extended-resource request but the Pod names it in "
            "spec.resourceClaims; request the extended resource in resources.limits instead",
        )
    return None


def check_extended_claim(pod: Mapping[str, Any], claim: Mapping[str, Any]) -> Refusal | None:
    """The claim the Pod's status names is the scheduler's claim for this very Pod."""
    name = (pod.get("metadata") or {}).get("name")
    if not is_extended_resource_claim(claim):
        return (
            UNSUPPORTED_MANAGED_CLAIM_KIND,
            f"Pod {name} names it as its extended-resource claim but it lacks the "
            f"{EXTENDED_RESOURCE_ANNOTATION} annotation the scheduler sets",
        )
    if not is_for_pod(pod, claim):
        return (
            CLAIM_NOT_OWNED_BY_POD,
            f"Pod {name} names it as its extended-resource claim but does not own it",
        )
    return None
