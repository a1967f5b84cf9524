"""ResolvePodForClaim (spec 6.1: take the Pod from the reservation, never search for one): the one
Pod a managed claim is prepared for, verified live.

The kubelet RPC names a claim, not a Pod, and reservedFor is a consumer list. So the consumer is
taken from the reservation, fetched live, checked against this node, and must itself reference the
exact claim: through pod.spec.resourceClaims (resourceclaim.Name semantics), or, for the claim the
scheduler made for the Pod's extended resources, through status.extendedResourceClaimStatus
(sriov_dra.core.extendedclaim decides). Everything outside the first supported envelope (spec 4.1:
one ordinary Pod consumer, exclusive VFs, no hostNetwork) is refused here, before any VF is
touched, each with its own reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.core import extendedclaim
from sriov_dra.core.extendedclaim import EXTENDED_ALIAS, Refusal, is_for_pod
from sriov_dra.core.interfaceplan import canonical_aliases
from sriov_dra.model import DRIVER_NAME
from sriov_dra.ports import ClaimReader, PodReader


class ConsumerError(ReasonedError):
    """The claim's consumer is outside what managed networking supports, or cannot be verified."""


@dataclass(frozen=True)
class Consumer:
    """The verified Pod and every claim it references, keyed by claim UID."""

    pod: Mapping[str, Any]
    claims: Mapping[str, Mapping[str, Any]]
    aliases: Mapping[str, str]
    """Claim UID -> the lexically first alias the Pod uses for it."""

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])


def _where(claim: Mapping[str, Any]) -> str:
    meta = claim.get("metadata") or {}
    return f"claim {meta.get('namespace')}/{meta.get('name')} ({meta.get('uid')})"


def _refuse(reason: str, claim: Mapping[str, Any], why: str) -> ConsumerError:
    return ConsumerError(reason, f"{_where(claim)}: {why}", claim=_where(claim))


def _refuse_if(claim: Mapping[str, Any], refusal: Refusal | None) -> None:
    if refusal is not None:
        reason, why = refusal
        raise _refuse(reason, claim, why)


def check_claim_envelope(claim: Mapping[str, Any]) -> tuple[str, str]:
    """Pure spec 4.1 envelope checks on the claim alone; returns the reserved Pod's (name, UID)."""
    meta = claim.get("metadata") or {}
    if not all(meta.get(k) for k in ("namespace", "name", "uid")):
        raise _refuse(reasons.INVALID_CLAIM, claim, "namespace, name and UID are required")
    status = claim.get("status") or {}
    allocation = status.get("allocation")
    if not allocation:
        raise _refuse(
            reasons.CLAIM_NOT_ALLOCATED, claim, "it has no allocation; the scheduler has not placed it"
        )
    for result in (allocation.get("devices") or {}).get("results") or []:
        if result.get("driver") != DRIVER_NAME:
            continue
        device = f"{result.get('pool')}/{result.get('device')}"
        if result.get("adminAccess"):
            raise _refuse(
                reasons.ADMIN_ACCESS_UNSUPPORTED,
                claim,
                f"device {device} is allocated with adminAccess; managed VFs are exclusive, remove adminAccess",
            )
        if result.get("shareID") or result.get("consumedCapacity"):
            raise _refuse(
                reasons.SHARED_ALLOCATION_UNSUPPORTED,
                claim,
                f"device {device} is allocated with a share ID or consumed capacity; managed VFs cannot "
                "be shared",
            )
    reserved = status.get("reservedFor") or []
    if len(reserved) != 1:
        raise _refuse(
            reasons.MULTIPLE_CONSUMERS_UNSUPPORTED if reserved else reasons.CLAIM_NOT_RESERVED,
            claim,
            f"it is reserved for {len(reserved)} consumers; a managed claim serves exactly one Pod, "
            "use one ResourceClaimTemplate-generated claim per Pod",
        )
    (entry,) = reserved
    if entry.get("apiGroup") or entry.get("resource") != "pods":
        kind = f"{entry.get('apiGroup') or 'core'}/{entry.get('resource')}"
        raise _refuse(
            reasons.UNSUPPORTED_RESERVATION,
            claim,
            f"it is reserved for a {kind} consumer; managed networking supports Pod consumers only",
        )
    if not entry.get("name") or not entry.get("uid"):
        raise _refuse(reasons.UNSUPPORTED_RESERVATION, claim, "its Pod reservation lacks a name or UID")
    return str(entry["name"]), str(entry["uid"])


def check_pod(pod: Mapping[str, Any], claim: Mapping[str, Any], uid: str, node_name: str) -> None:
    """The live Pod is the reserved one and runs on this node."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if meta.get("uid") != uid:
        raise _refuse(
            reasons.POD_REPLACED,
            claim,
            f"it is reserved for Pod UID {uid} but Pod {meta.get('name')} now has UID {meta.get('uid')}",
        )
    if spec.get("nodeName") != node_name:
        raise _refuse(
            reasons.POD_ON_OTHER_NODE,
            claim,
            f"Pod {meta.get('name')} is bound to node {spec.get('nodeName')!r}, not {node_name}",
        )


def check_new_consumer(pod: Mapping[str, Any], claim: Mapping[str, Any]) -> None:
    """Only a first prepare refuses these; retries and release follow the binding's lifecycle."""
    name = (pod.get("metadata") or {}).get("name")
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        raise _refuse(
            reasons.POD_TERMINATING, claim, f"Pod {name} is terminating; no new network is attached"
        )
    if (pod.get("spec") or {}).get("hostNetwork"):
        raise _refuse(
            reasons.HOST_NETWORK_UNSUPPORTED,
            claim,
            f"Pod {name} uses hostNetwork, which has no Pod network namespace for a managed VF",
        )


def pod_claim_names(pod: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """(alias, claim name, must check owner) per pod.spec.resourceClaims entry that has a claim.

    resourceclaim.Name semantics: a direct name needs no owner check; a template entry resolves
    through status.resourceClaimStatuses, where a null name means intentionally absent (skipped).
    """
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    out = []
    where = f"Pod {(pod.get('metadata') or {}).get('name')}"
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        alias = str(entry.get("name") or "")
        if entry.get("resourceClaimName"):
            out.append((alias, str(entry["resourceClaimName"]), False))
        elif entry.get("resourceClaimTemplateName"):
            if alias not in statuses:
                raise ConsumerError(
                    reasons.POD_CLAIM_STATUS_MISSING,
                    f"{where}: claim {alias!r} comes from a template but status.resourceClaimStatuses has "
                    "no entry for it yet; kubelet retries once the controller has created the claim",
                )
            if statuses[alias]:
                out.append((alias, str(statuses[alias]), True))
        else:
            raise ConsumerError(
                reasons.INVALID_POD_CLAIM,
                f"{where}: resourceClaims entry {alias!r} names neither a claim nor a template",
            )
    return out


class ConsumerResolver:
    """ResolvePodForClaim over live reads."""

    def __init__(
        self,
        *,
        pods: PodReader,
        claims: ClaimReader,
        node_name: str,
        node_uid: str,
        live_node_uid: Callable[[], str],
    ) -> None:
        self._pods = pods
        self._claims = claims
        self._node_name = node_name
        self._node_uid = node_uid
        self._live_node_uid = live_node_uid

    def live_node_uid(self) -> str:
        """The Node's UID as the API server has it now."""
        return self._live_node_uid()

    def resolve(self, claim: Mapping[str, Any]) -> Consumer:
        pod_name, pod_uid = check_claim_envelope(claim)
        namespace = str(claim["metadata"]["namespace"])
        pod = self._pods.get_pod(namespace, pod_name)
        if pod is None:
            raise _refuse(
                reasons.POD_NOT_FOUND, claim, f"its reserved Pod {namespace}/{pod_name} does not exist"
            )
        check_pod(pod, claim, pod_uid, self._node_name)
        live = self.live_node_uid()
        if live != self._node_uid:
            raise _refuse(
                reasons.NODE_REPLACED,
                claim,
                f"Node {self._node_name} now has UID {live}, this driver started on UID {self._node_uid}; "
                "restart the driver",
            )
        return self.claims_of(pod, claim)

    def claims_of(self, pod: Mapping[str, Any], claim: Mapping[str, Any]) -> Consumer:
        """Every claim the Pod references, which must include `claim` itself: its spec.resourceClaims
        and the claim the scheduler made for its extended resources."""
        namespace = str(claim["metadata"]["namespace"])
        by_uid: dict[str, Mapping[str, Any]] = {}
        pairs: list[tuple[str, str]] = []

        def add(alias: str, found: Mapping[str, Any]) -> None:
            uid = str(found["metadata"]["uid"])
            by_uid[uid] = found
            pairs.append((alias, uid))

        def fetch(name: str) -> Mapping[str, Any]:
            return claim if name == claim["metadata"]["name"] else self._claims.get_claim(namespace, name)

        spec_claims = pod_claim_names(pod)
        _refuse_if(claim, extendedclaim.reached_both_ways(pod, [name for _a, name, _o in spec_claims]))
        for alias, name, check_owner in spec_claims:
            found = fetch(name)
            if check_owner and not is_for_pod(pod, found):
                raise _refuse(
                    reasons.CLAIM_NOT_OWNED_BY_POD,
                    found,
                    f"Pod {pod['metadata']['name']} names it for template claim {alias!r} but does not own it",
                )
            _refuse_if(found, extendedclaim.check_spec_claim(found))
            add(alias, found)
        extended = extendedclaim.extended_claim_name(pod)
        if extended:
            found = fetch(extended)
            _refuse_if(found, extendedclaim.check_extended_claim(pod, found))
            add(EXTENDED_ALIAS, found)
        if claim["metadata"]["uid"] not in by_uid:
            raise _refuse(
                reasons.UNREFERENCED_CLAIM,
                claim,
                f"its reserved Pod {pod['metadata']['name']} does not reference it in spec.resourceClaims",
            )
        return Consumer(pod=pod, claims=by_uid, aliases=canonical_aliases(pairs))
