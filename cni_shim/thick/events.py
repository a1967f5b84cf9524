"""The daemon's Pod Events: collected per ADD, queued after the reply, written by one worker.

An ADD never waits for an Event and never fails because of one: the dispatcher hands a request's
Events to EventQueue.submit only once the answer is on its way to the shim, the queue is bounded
(a full queue drops and counts), and the worker's API errors are logged and counted.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from cni_shim.errors import KubeApiError
from cni_shim.kube.paths import events_path

QUEUE_SIZE = 1024


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


class EventQueue:
    def __init__(self, api: Poster, counts: Counts, log: Callable[..., None], size: int = QUEUE_SIZE) -> None:
        self._api = api
        self._counts = counts
        self._log = log
        self._queue: queue.Queue[Mapping[str, Any] | None] = queue.Queue(size)
        self._thread: threading.Thread | None = None

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
            namespace = str(event["metadata"]["namespace"])
            try:
                self._api.post(events_path(namespace), event, f"Event in {namespace}")
            except KubeApiError as exc:
                self._counts.pod_event("failed")
                self._log("warning", f"could not record a {event.get('reason')} Event: {exc.message}")
            else:
                self._counts.pod_event("written")
