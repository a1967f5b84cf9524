"""Thin mode's Pod Events: written beside the status write, best effort, inside a short budget.

One `cni-shim` process cannot write after it answers (the runtime waits for it to exit), so the
Events go out on a second connection while the ADD writes the Pod's network-status on the first:
the API server handles both at once, and the ADD waits for the slower of the two instead of
their sum. Each Event gets a short timeout and all of them together EVENT_BUDGET; what does not
fit is dropped and logged by the core, and the ADD's outcome never depends on it. Standard
library only (`_thread`: the `threading` module is one more import for every CNI start).
"""

from __future__ import annotations

import _thread
import time
from collections.abc import Callable, Mapping, Sequence

from cni_shim.errors import ApiError

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

EVENT_BUDGET = 1.0
EVENT_TIMEOUT = 0.5


class ThinEvents:
    def __init__(
        self,
        client: Callable[[], object],
        budget: float = EVENT_BUDGET,
        timeout: float = EVENT_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._budget = budget
        self._timeout = timeout
        self._clock = clock
        self._deadline = 0.0
        # The running batch: its lock (released when it ends) and where it leaves its failure.
        self._batch: tuple[Any, list[BaseException]] | None = None

    def publish(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Start writing `events` on a connection of their own; `settle` waits for the outcome."""
        self.settle()  # one writer at a time: an earlier batch is finished (or given up) first
        # Duck-typed: no API client (Multus's no-Kubernetes mode) or a view that cannot write Events.
        sibling = getattr(self._client(), "sibling", None)
        if sibling is None or not events:
            return
        batch = list(events)
        self._deadline = self._clock() + self._budget
        done = _thread.allocate_lock()
        done.acquire()
        failures: list[BaseException] = []
        self._batch = (done, failures)
        _thread.start_new_thread(self._write, (sibling, batch, done, failures))

    def settle(self) -> None:
        """Wait, within the budget, for the batch `publish` started; raise what it failed with."""
        batch, self._batch = self._batch, None
        if batch is None:
            return
        done, failures = batch
        if not done.acquire(timeout=max(self._deadline - self._clock(), 0.0)):
            raise ApiError(f"Event(s) still unwritten after the {self._budget:g}s budget", 0)
        if failures:
            raise failures[0]

    def _write(
        self,
        sibling: Callable[[], Any],
        events: list[Mapping[str, Any]],
        done: Any,
        failures: list[BaseException],
    ) -> None:
        try:
            client = sibling()
            try:
                for index, event in enumerate(events):
                    left = self._deadline - self._clock()
                    if left <= 0:
                        raise ApiError(
                            f"{len(events) - index} Event(s) left unwritten after the {self._budget:g}s budget",
                            0,
                        )
                    client.create_event(event, min(left, self._timeout))
            finally:
                client.close()
        except BaseException as exc:  # handed to settle(), which the core logs
            failures.append(exc)
        finally:
            done.release()
