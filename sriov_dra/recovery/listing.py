"""A repair pass's listings (spec 8.3: a healthy claim costs no request of its own): this node's
shadows, its Pods, the ResourceClaims of the namespaces its claims are in and the Node's UID, each
one consistent read per pass.

Nothing here grows with the cluster (issue 34): shadows and Pods are selected by this node on the
API server, and claims, which carry no field naming their node, are listed only in the
namespaces of the checkpoint's claims, never cluster-wide."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

from sriov_contract.errors import ReasonedError
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.passdrift import PassListing, by_uid, ready_bindings
from sriov_dra.core.shadowmatch import index_shadows
from sriov_dra.ports import ClaimLister, PodLister, ShadowLister
from sriov_dra.state.checkpoint import PreparedClaims

log = logging.getLogger(__name__)

# What each of a pass's reads lists, for its warning when it fails.
_LISTED: Final = {
    "shadows": "this node's shadows",
    "pods": "this node's Pods",
    "claims": "the ResourceClaims of this node's namespaces",
    "node_uid": "the Node",
}

_T = TypeVar("_T")
# Namespace listings of one pass run at once, up to this many.
NAMESPACE_READERS: Final = 4


def claims_in(lister: ClaimLister, namespaces: Collection[str]) -> dict[str, Mapping[str, Any]]:
    """The ResourceClaims of `namespaces` by UID: one consistent listing per namespace, a few at
    once. A failed one fails the whole read (its caller treats the claims as not listed)."""
    ordered = sorted(namespaces)
    if len(ordered) <= 1:
        return {uid: c for ns in ordered for uid, c in by_uid(lister.list_claims(ns)).items()}
    with ThreadPoolExecutor(min(NAMESPACE_READERS, len(ordered)), thread_name_prefix="claims") as pool:
        listed = list(pool.map(lambda ns: by_uid(lister.list_claims(ns)), ordered))
    return {uid: claim for claims in listed for uid, claim in claims.items()}


class PassLister:
    """The listings one repair pass checks its claims against (sriov_dra.core.passdrift)."""

    def __init__(
        self,
        *,
        checkpoint: PreparedClaims,
        node_name: str,
        node_uid: str,
        live_node_uid: Callable[[], str],
        shadows: ShadowLister | None = None,
        pods: PodLister | None = None,
        claims: ClaimLister | None = None,
    ) -> None:
        self._checkpoint = checkpoint
        self._node_name = node_name
        self._node_uid = node_uid
        self._live_node_uid = live_node_uid
        self._shadows = shadows
        self._pods = pods
        self._claims = claims

    def list_for_pass(self, records: Sequence[ClaimRecord] | None = None) -> PassListing:
        """One repair pass's listings: this node's shadows, its Pods, the claims of the namespaces
        its records are in and the Node's UID, beside what the pass's checkpoint `records` (by
        default a fresh snapshot) expect of them.

        Each is one consistent read (no resourceVersion); one that is not configured or fails is
        left out, and every claim then takes the live path as it would without it. The reads run
        at once, each on its own thread, and the records are decoded meanwhile: what the API
        server spends on one listing overlaps our decoding of the others.
        """
        if records is None:
            records = self._checkpoint.snapshot_all()
        shadows, pods, claims = self._shadows, self._pods, self._claims
        reads: dict[str, Callable[[], Any]] = {}
        if shadows is not None:
            reads["shadows"] = lambda: index_shadows(shadows.list_shadows(self._node_uid))
        if pods is not None and claims is not None:
            reads["pods"] = lambda: by_uid(pods.list_node_pods(self._node_name))
            # A claim lives in its Pod's namespace, which its record names: the namespaces of
            # this node's claims hold every claim a pass checks.
            namespaces = {r.namespace for r in records}
            reads["claims"] = lambda: claims_in(claims, namespaces)
            reads["node_uid"] = self._live_node_uid
        with ThreadPoolExecutor(max(1, len(reads)), thread_name_prefix="pass-list") as pool:
            pending = {key: pool.submit(_listed, _LISTED[key], read) for key, read in reads.items()}
            ready = ready_bindings(records)
            listed = {key: future.result() for key, future in pending.items()}
        return PassListing(ready=ready, **listed)


def _listed(what: str, read: Callable[[], _T]) -> _T | None:
    try:
        return read()
    except ReasonedError as exc:
        log.warning("repair pass reads each claim live: listing %s failed: %s", what, exc)
        return None
