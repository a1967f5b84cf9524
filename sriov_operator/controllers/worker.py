"""One level-triggered work item per controller: events set a trigger, a worker thread runs a
full pass. Bursts coalesce into one pass; a failed pass backs off (1 s doubling to 30 s); a
periodic resync recovers from missed events."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 30.0


class Worker:
    def __init__(self, name: str, reconcile: Callable[[], bool], resync_s: float) -> None:
        """`reconcile` returns True when the pass completed, False when it must be retried."""
        self.name = name
        self._reconcile = reconcile
        self._resync_s = resync_s
        self._trigger = threading.Event()
        self.passes = 0

    def trigger(self) -> None:
        self._trigger.set()

    def run(self, stop: threading.Event) -> None:
        backoff = BACKOFF_MIN_S
        next_resync = time.monotonic() + self._resync_s
        self._trigger.set()
        idle = False
        while not stop.is_set():
            if not self._trigger.wait(0.2):
                if not idle:
                    # Once per quiet spell: tests wait for it to know no pass is pending.
                    log.debug("%s idle", self.name)
                    idle = True
                if time.monotonic() >= next_resync:
                    self._trigger.set()
                continue
            idle = False
            self._trigger.clear()
            next_resync = time.monotonic() + self._resync_s
            try:
                ok = self._reconcile()
            except Exception:
                log.exception("%s pass failed", self.name)
                ok = False
            self.passes += 1
            if ok:
                backoff = BACKOFF_MIN_S
                continue
            stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            self._trigger.set()
