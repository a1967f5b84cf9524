"""The repair worker (spec 8.3: repair forward from the checkpoint; only kubelet authorizes a release):
converges every checkpointed managed claim, independently of kubelet.

It runs once before the agent reports ready, then periodically (a bounded, jittered interval)
and sooner when a watch event says something changed. Each claim is repaired by
sriov_dra.recovery.claimrepair.ClaimRepairer under the same claim-then-Pod locks kubelet's calls
take, so repair and kubelet never interleave on one claim. A claim that fails is retried with exponential backoff:
a broken API server or a stuck object costs a bounded number of calls, and the same failure is
logged and reported once per streak rather than on every pass.

Given a listing, a pass starts with one list each of this node's shadows, this node's Pods and the
ResourceClaims (and one read of the Node: sriov_dra.recovery.listing.PassLister), so a healthy
claim costs no request of its own and a pass a handful in all; a claim the listing shows drifted
takes the live path alone. The listing belongs to that pass and is never used by kubelet's calls.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.apierrors import ApiError
from sriov_dra.core.backoff import backoff, jittered
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.passdrift import PassListing
from sriov_dra.kubeletplugin.api import ClaimRef
from sriov_dra.observe.bindingreporter import NULL_OBSERVER, PhaseObserver
from sriov_dra.recovery.claimrepair import ClaimRepairer

if TYPE_CHECKING:
    from sriov_dra.observe.metrics import DriverMetrics

log = logging.getLogger(__name__)

DEFAULT_INTERVAL: Final = 30.0
JITTER: Final = 0.2
# Watch events arrive in bursts (our own writes cause some); one pass per second is plenty.
MIN_SPACING: Final = 1.0
OK: Final = ""
BACKING_OFF: Final = "BackingOff"


@dataclass
class _Streak:
    reason: str
    failures: int
    retry_at: float


class RepairWorker:
    def __init__(
        self,
        repairer: ClaimRepairer[Any],
        snapshot: Callable[[], Sequence[ClaimRecord]],
        *,
        interval: float = DEFAULT_INTERVAL,
        observer: PhaseObserver = NULL_OBSERVER,
        metrics: DriverMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
        listing: Callable[[Sequence[ClaimRecord]], PassListing] | None = None,
    ) -> None:
        self._repairer = repairer
        self._snapshot = snapshot
        self._interval = interval
        self._observer = observer
        self._metrics = metrics
        self._clock = clock
        self._rand = rand
        self._listing = listing
        self._trigger = threading.Event()
        self._streaks: dict[str, _Streak] = {}
        self.passes = 0

    def trigger(self) -> None:
        """Ask for a pass soon (a watch event saw a change)."""
        self._trigger.set()

    def run_once(self) -> Mapping[str, str]:
        """One pass; returns each claim's outcome: "" repaired or healthy, a reason, or BackingOff."""
        started = self._clock()
        outcomes: dict[str, str] = {}
        # One copy of the checkpoint per pass: the listing's expectations and each claim's
        # unlocked checks read it (a claim about to be written is read again under its locks).
        records = self._snapshot()
        # A node with nothing to repair does not list anything.
        listed = self._listing(records) if self._listing is not None and records else None
        for record in records:
            outcomes[record.claim_uid] = self._repair(record, started, listed)
        for gone in set(self._streaks) - {r.claim_uid for r in records}:
            del self._streaks[gone]
        self.passes += 1
        if self._metrics is not None:
            self._metrics.repair_seconds.observe(self._clock() - started)
        return outcomes

    def _repair(self, record: ClaimRecord, now: float, listed: PassListing | None) -> str:
        streak = self._streaks.get(record.claim_uid)
        if streak is not None and now < streak.retry_at:
            return BACKING_OFF
        try:
            self._repairer.repair_claim(record.claim_uid, listed, recorded=record)
        except ReasonedError as exc:
            self._failed(record, exc, streak, now)
            return exc.reason
        except Exception as exc:  # a bug must not stop repair of every other claim
            log.exception("repair of claim %s failed unexpectedly", record.claim_uid)
            self._failed(
                record, ReasonedError(reasons.REPAIR_CRASHED, f"{exc.__class__.__name__}: {exc}"), streak, now
            )
            return reasons.REPAIR_CRASHED
        if streak is not None:
            log.info(
                "claim %s/%s (%s) repaired after %s",
                record.namespace,
                record.name,
                record.claim_uid,
                streak.reason,
            )
            del self._streaks[record.claim_uid]
        return OK

    def _failed(self, record: ClaimRecord, exc: ReasonedError, streak: _Streak | None, now: float) -> None:
        failures = 1 if streak is None else streak.failures + 1
        self._streaks[record.claim_uid] = _Streak(exc.reason, failures, now + backoff(failures))
        if streak is None or streak.reason != exc.reason:
            ref = ClaimRef(record.namespace, record.name, record.claim_uid)
            self._observer.failed("repair", ref, record, exc)
        elif self._metrics is not None:
            # Reported already (event, log); the metric still counts every failed attempt.
            self._metrics.failure("repair", exc.reason, exc.status if isinstance(exc, ApiError) else None)

    def run(self, stop: threading.Event) -> None:
        """Periodic and triggered passes until `stop`; the first pass is the caller's run_once."""
        next_periodic = self._clock() + jittered(self._interval, JITTER, self._rand())
        while not stop.is_set():
            timeout = max(0.0, next_periodic - self._clock())
            triggered = self._trigger.wait(min(timeout, 1.0))
            if stop.is_set():
                return
            if not triggered and self._clock() < next_periodic:
                continue
            self._trigger.clear()
            self.run_once()
            next_periodic = self._clock() + jittered(self._interval, JITTER, self._rand())
            stop.wait(MIN_SPACING)
