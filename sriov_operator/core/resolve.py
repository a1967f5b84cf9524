"""A policy's SriovNetwork reference to a ready source NAD (spec 12.2.3), by live reads.

Ready means all of: the SriovNetwork exists and is not deleting; it obeys the networkNamespace
rule; its Ready condition is True for its current generation; the NAD at its target
exists, is not deleting, carries its owner marker, holds exactly the config desired_config produces
and, in the same namespace, no SriovNetwork ownerReference of another UID. Neither the
SriovNetwork's nor the policy's resourceName takes part (spec 12.2.3: no equality linkage).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sriov_operator.core.attributes import NetworkRef
from sriov_operator.core.keys import OWNER_REF_ANNOTATION, READY
from sriov_operator.core.sourcenad import (
    config_matches,
    desired_config,
    namespace_problem,
    owner_marker,
    target_of,
)
from sriov_operator.reasons import (
    SOURCE_NAD_NOT_READY,
    SRIOV_NETWORK_NOT_FOUND,
    SRIOV_NETWORK_NOT_READY,
    OperatorError,
    fail,
)


class SourceReader(Protocol):
    """Live reads; None for 404. A 403 raises SourceAccessDenied, other failures
    DRAConfigurationSyncFailed (both OperatorError)."""

    def get_network(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def get_nad(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


@dataclass(frozen=True, order=True)
class SourceNad:
    """The resolved driver-facing pair: always both, always explicit."""

    namespace: str
    name: str


def ready_problem(network: Mapping[str, Any]) -> str | None:
    """Why the SriovNetwork's Ready condition does not vouch for its current generation."""
    md = network.get("metadata") or {}
    generation = md.get("generation")
    for cond in (network.get("status") or {}).get("conditions") or []:
        if cond.get("type") != READY:
            continue
        if cond.get("status") != "True":
            return f"is Ready={cond.get('status')} ({cond.get('reason')})"
        if cond.get("observedGeneration") != generation:
            return f"is Ready for generation {cond.get('observedGeneration')}, not the current {generation}"
        return None
    return "has no Ready condition yet"


def resolve(ref: NetworkRef, reader: SourceReader, *, operator_namespace: str) -> SourceNad:
    """The ready source NAD of `ref`, or an OperatorError with the precise reason."""
    network = reader.get_network(ref.namespace, ref.name)
    what = f"SriovNetwork {ref}"
    if network is None:
        raise fail(SRIOV_NETWORK_NOT_FOUND, f"{what} does not exist; create it or fix the reference")
    if (network.get("metadata") or {}).get("deletionTimestamp"):
        raise fail(SRIOV_NETWORK_NOT_READY, f"{what} is being deleted; reference another SriovNetwork")
    problem = namespace_problem(network, operator_namespace)
    if problem:
        raise fail(SRIOV_NETWORK_NOT_READY, problem)
    not_ready = ready_problem(network)
    if not_ready:
        raise fail(SRIOV_NETWORK_NOT_READY, f"{what} {not_ready}; see its Ready condition")
    namespace, name = target_of(network)
    nad_what = f"source NetworkAttachmentDefinition {namespace}/{name} of {what}"
    nad = reader.get_nad(namespace, name)
    if nad is None:
        raise fail(SOURCE_NAD_NOT_READY, f"{nad_what} does not exist; the network controller creates it")
    md = nad.get("metadata") or {}
    if md.get("deletionTimestamp"):
        raise fail(SOURCE_NAD_NOT_READY, f"{nad_what} is being deleted")
    marker = (md.get("annotations") or {}).get(OWNER_REF_ANNOTATION)
    if marker != owner_marker(network):
        raise fail(
            SOURCE_NAD_NOT_READY,
            f"{nad_what} has owner marker {marker!r}, not {owner_marker(network)!r}; only the network "
            "controller may write it",
        )
    try:
        expected = desired_config(network)
    except OperatorError as exc:
        raise fail(SRIOV_NETWORK_NOT_READY, exc.message) from None
    if not config_matches(nad, expected):
        raise fail(
            SOURCE_NAD_NOT_READY,
            f"{nad_what} does not hold the configuration rendered from the SriovNetwork; do not edit it "
            "by hand (the network controller restores it)",
        )
    uid = (network.get("metadata") or {}).get("uid")
    stale = [
        r.get("uid")
        for r in md.get("ownerReferences") or []
        if r.get("kind") == "SriovNetwork" and r.get("uid") != uid
    ]
    if stale:
        raise fail(
            SOURCE_NAD_NOT_READY,
            f"{nad_what} is owned by a replaced SriovNetwork (UID {stale[0]}); the network controller "
            "updates it",
        )
    return SourceNad(namespace=namespace, name=name)
