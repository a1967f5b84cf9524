"""Thin mode's Pod Events: written at the end of the ADD, best effort, inside a short budget.

One `cni-shim` process cannot write after it answers (the runtime waits for it to exit), so each
Event gets a short timeout and all of them together EVENT_BUDGET; what does not fit is dropped
and logged by the core, and the ADD's outcome never depends on it. Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from cni_shim.errors import KubeApiError

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

    def publish(self, events: Sequence[Mapping[str, Any]]) -> None:
        # Duck-typed: no API client (Multus's no-Kubernetes mode) or one that cannot write Events.
        create_event = getattr(self._client(), "create_event", None)
        if create_event is None:
            return
        deadline = self._clock() + self._budget
        for index, event in enumerate(events):
            left = deadline - self._clock()
            if left <= 0:
                raise KubeApiError(
                    f"{len(events) - index} Event(s) left unwritten after the {self._budget:g}s budget", 0
                )
            create_event(event, min(left, self._timeout))
