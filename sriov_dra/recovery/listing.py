"""A repair pass's listings (spec 8.3: a healthy claim costs no request of its own): this node's
shadows, its Pods, the ResourceClaims and the Node's UID, each one consistent read per pass."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
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
    "claims": "the ResourceClaims",
    "node_uid": "the Node",
}

_T = TypeVar("_T")


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
        """One repair pass's listings: this node's shadows, its Pods, the claims and the Node's UID,
        beside what the pass's checkpoint `records` (by default a fresh snapshot) expect of them.

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
            reads["claims"] = lambda: by_uid(claims.list_claims())
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
