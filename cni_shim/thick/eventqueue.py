"""The daemon's Pod Events: collected per ADD, queued after the reply, written by one worker.

An ADD never waits for an Event and never fails because of one: the dispatcher hands a request's
Events to EventQueue.submit only once the answer is on its way to the shim, the queue is bounded
(a full queue drops and counts), and the worker's API errors are logged and counted.

The worker applies client-go's per-object spam filter, as Multus thick's long-lived recorder does:
each involved object (with the Event's source) has a bucket of SPAM_BURST Events that refills one
every SPAM_REFILL_SECONDS; an Event without a token is not written (counted as filtered). A Pod
gets one Event per ADD, so only a sandbox re-created over and over (a crash loop, a benchmark)
reaches the limit, and the API server is spared one write per ADD there.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from cni_shim.errors import ApiError
from cni_shim.kube.paths import events_path

QUEUE_SIZE = 1024
# client-go's EventSourceObjectSpamFilter defaults (tools/record), and the size of its LRU of buckets.
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
SPAM_KEYS = 4096


class Poster(Protocol):
    def post(self, path: str, body: Mapping[str, Any], what: str) -> int: ...


class Counts(Protocol):
    def pod_event(self, result: str) -> None: ...


class Collector:
    """One request's EventSink: keeps what the core publishes until the reply has gone."""

    def __init__(self) -> None:
        self.events: list[Mapping[str, Any]] = []

    def publish(self, events: Sequence[Mapping[str, Any]]) -> None:
        self.events.extend(events)

    def settle(self) -> None:
        """Nothing runs yet: the dispatcher queues the events once the reply has gone."""


def spam_key(event: Mapping[str, Any]) -> tuple[str, ...]:
    """client-go's getSpamKey: the Event's source and its involved object, whatever the reason."""
    source = event.get("source") or {}
    involved = event.get("involvedObject") or {}
    return (
        str(source.get("component", "")),
        str(source.get("host", "")),
        *(str(involved.get(k, "")) for k in ("kind", "namespace", "name", "uid", "apiVersion")),
    )


class SpamFilter:
    """A token bucket per spam key; the least recently seen keys are forgotten past `size`."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        size: int = SPAM_KEYS,
    ) -> None:
        self._clock = clock
        self._burst = float(burst)
        self._refill = refill_seconds
        self._size = size
        self._buckets: OrderedDict[tuple[str, ...], tuple[float, float]] = OrderedDict()

    def allow(self, event: Mapping[str, Any]) -> bool:
        key = spam_key(event)
        now = self._clock()
        tokens, then = self._buckets.pop(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - then) / self._refill)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        if len(self._buckets) > self._size:
            self._buckets.popitem(last=False)
        return allowed


class EventQueue:
    def __init__(
        self,
        api: Poster,
        counts: Counts,
        log: Callable[..., None],
        size: int = QUEUE_SIZE,
        spam: SpamFilter | None = None,
    ) -> None:
        self._api = api
        self._counts = counts
        self._log = log
        self._queue: queue.Queue[Mapping[str, Any] | None] = queue.Queue(size)
        self._thread: threading.Thread | None = None
        self._spam = spam or SpamFilter()

    def start(self) -> EventQueue:
        self._thread = threading.Thread(target=self._work, name="pod-events", daemon=True)
        self._thread.start()
        return self

    def submit(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Never blocks: an Event that does not fit is dropped (counted, logged)."""
        for event in events:
            try:
                self._queue.put_nowait(event)
            except queue.Full:
                self._counts.pod_event("dropped")
                self._log("warning", f"Pod Event queue full; dropped {event.get('reason')} Event")

    def stop(self, timeout: float) -> None:
        """Write what is queued (within `timeout`), then end the worker."""
        if self._thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _work(self) -> None:
        while (event := self._queue.get()) is not None:
            if not self._spam.allow(event):
                self._counts.pod_event("filtered")
                continue
            namespace = str(event["metadata"]["namespace"])
            try:
                self._api.post(events_path(namespace), event, f"Event in {namespace}")
            except ApiError as exc:
                self._counts.pod_event("failed")
                self._log("warning", f"could not record a {event.get('reason')} Event: {exc.message}")
            else:
                self._counts.pod_event("written")
