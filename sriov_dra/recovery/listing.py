"""A repair pass's listings (spec 8.3: a healthy claim costs no request of its own): this node's
shadows and the ResourceClaims in the namespaces its claims are in, its Pods and the Node's UID,
each one consistent read per pass (per namespace).

Nothing here grows with the cluster (issue 34): Pods are selected by this node on the API server
(an indexed field), shadows and claims, which carry no field naming their node, are listed only
in the namespaces of the checkpoint's claims, never cluster-wide (a label selector across all
namespaces has the API server read every NAD of the cluster). A namespace shared with many other
nodes' claims (one large job spread over the cluster) would bring them all with it on every
pass, so a namespace whose listing held far more claims than this node's is read claim by claim
(one consistent GET each) from the next pass on: a pass costs what this node holds either way."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from itertools import chain
from typing import Any, Final, TypeVar

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.passdrift import PassListing, by_uid, ready_bindings
from sriov_dra.core.shadowmatch import index_shadows
from sriov_dra.ports import ClaimLister, ClaimReader, NamespaceShadowLister, PodLister
from sriov_dra.state.checkpoint import PreparedClaims

log = logging.getLogger(__name__)

# What each of a pass's reads lists, for its warning when it fails.
_LISTED: Final = {
    "shadows": "this node's shadows in its namespaces",
    "pods": "this node's Pods",
    "claims": "the ResourceClaims of this node's namespaces",
    "node_uid": "the Node",
}

_T = TypeVar("_T")
# Namespace listings (and claim reads) of one pass run at once, up to this many.
NAMESPACE_READERS: Final = 4
# A namespace listing that held more than CROWDED_FACTOR times the claims the pass needed from it,
# plus CROWDED_SLACK, makes that namespace read claim by claim from then on.
CROWDED_FACTOR: Final = 4
CROWDED_SLACK: Final = 32


def claims_in(lister: ClaimLister, namespaces: Collection[str]) -> dict[str, Mapping[str, Any]]:
    """The ResourceClaims of `namespaces` by UID: one consistent listing per namespace, a few at
    once. A failed one fails the whole read (its caller treats the claims as not listed)."""
    ordered = sorted(namespaces)
    with ThreadPoolExecutor(
        max(1, min(NAMESPACE_READERS, len(ordered))), thread_name_prefix="claims"
    ) as pool:
        listed = list(pool.map(partial(_namespace_claims, lister), ordered))
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
        shadows: NamespaceShadowLister | None = None,
        pods: PodLister | None = None,
        claims: ClaimLister | None = None,
        claim_reader: ClaimReader | None = None,
    ) -> None:
        self._checkpoint = checkpoint
        self._node_name = node_name
        self._node_uid = node_uid
        self._live_node_uid = live_node_uid
        self._shadows = shadows
        self._pods = pods
        self._claims = claims
        self._claim_reader = claim_reader
        self.crowded: set[str] = set()
        """Namespaces read claim by claim (see the module's docstring)."""

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
            # The records' namespaces hold every shadow a pass checks; listed there, the API
            # server reads those namespaces only (an orphan elsewhere is `sriov-dra orphans`' to find).
            namespaces = sorted({r.namespace for r in records})
            reads["shadows"] = lambda: index_shadows(
                chain.from_iterable(shadows.list_namespace_shadows(self._node_uid, ns) for ns in namespaces)
            )
        if pods is not None and claims is not None:
            reads["pods"] = lambda: by_uid(pods.list_node_pods(self._node_name))
            # A claim lives in its Pod's namespace, which its record names: the namespaces of
            # this node's claims hold every claim a pass checks.
            wanted = list(records)
            reads["claims"] = lambda: self._node_claims(claims, wanted)
            reads["node_uid"] = self._live_node_uid
        with ThreadPoolExecutor(max(1, len(reads)), thread_name_prefix="pass-list") as pool:
            pending = {key: pool.submit(_listed, _LISTED[key], read) for key, read in reads.items()}
            ready = ready_bindings(records)
            listed = {key: future.result() for key, future in pending.items()}
        return PassListing(ready=ready, **listed)

    def _node_claims(
        self, lister: ClaimLister, records: Sequence[ClaimRecord]
    ) -> dict[str, Mapping[str, Any]]:
        """The claims of `records` (and whatever else their namespaces hold, where listed)."""
        needed: dict[str, list[ClaimRecord]] = {}
        for record in records:
            needed.setdefault(record.namespace, []).append(record)
        reader = self._claim_reader
        one_by_one = [r for ns in sorted(needed) if ns in self.crowded for r in needed[ns]] if reader else []
        listed = sorted(ns for ns in needed if reader is None or ns not in self.crowded)
        reads: list[Callable[[], dict[str, Mapping[str, Any]]]] = [
            partial(_namespace_claims, lister, ns) for ns in listed
        ]
        if reader is not None:
            reads += [partial(_claim_of, reader, r) for r in one_by_one]
        with ThreadPoolExecutor(
            max(1, min(NAMESPACE_READERS, len(reads))), thread_name_prefix="claims"
        ) as pool:
            answers = list(pool.map(lambda read: read(), reads))
        for ns, answer in zip(listed, answers, strict=False):
            if len(answer) > CROWDED_FACTOR * len(needed[ns]) + CROWDED_SLACK:
                log.info(
                    "namespace %s holds %d claims, %d of them this node's: read claim by claim from now on",
                    ns, len(answer), len(needed[ns]),
                )  # fmt: skip
                self.crowded.add(ns)
        return {uid: claim for answer in answers for uid, claim in answer.items()}


def _namespace_claims(lister: ClaimLister, namespace: str) -> dict[str, Mapping[str, Any]]:
    return by_uid(lister.list_claims(namespace))


def _claim_of(reader: ClaimReader, record: ClaimRecord) -> dict[str, Mapping[str, Any]]:
    """One claim read (a consistent GET) by its UID; none when it is gone or is another one now."""
    try:
        claim = reader.get_claim(record.namespace, record.name)
    except ReasonedError as exc:
        if exc.reason == reasons.CLAIM_NOT_FOUND:
            return {}
        raise
    return {uid: claim for uid, claim in by_uid([claim]).items() if uid == record.claim_uid}


def _listed(what: str, read: Callable[[], _T]) -> _T | None:
    try:
        return read()
    except ReasonedError as exc:
        log.warning("repair pass reads each claim live: listing %s failed: %s", what, exc)
        return None
