"""Kubernetes Events, best effort: each distinct one sent once (a bounded memory of what was
sent), written by one sender thread once started, never failing the operation that reports it.

A repair loop that keeps meeting the same problem must not flood the API server, so an identical
event (same object, type, reason and message) goes out once.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from sriov_dra.ports import EventSink

log = logging.getLogger(__name__)

COMPONENT: Final = "sriov-dra-driver"
NORMAL: Final = "Normal"
WARNING: Final = "Warning"
REMEMBERED_EVENTS: Final = 4096
# Events waiting for the sender; a burst beyond this is dropped (and logged), never waited for.
QUEUED_EVENTS: Final = 1024


@dataclass(frozen=True)
class InvolvedObject:
    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str


def event_body(
    obj: InvolvedObject, type_: str, reason: str, message: str, *, host: str, now: datetime
) -> dict[str, Any]:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{obj.name}.{secrets.token_hex(8)}", "namespace": obj.namespace},
        "involvedObject": {
            "kind": obj.kind,
            "apiVersion": obj.api_version,
            "namespace": obj.namespace,
            "name": obj.name,
            "uid": obj.uid,
        },
        "type": type_,
        "reason": reason,
        # The API server limits an Event message to 1 KiB.
        "message": message[:1024],
        "source": {"component": COMPONENT, "host": host},
        "reportingComponent": COMPONENT,
        "reportingInstance": host,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class EventRecorder:
    """Best-effort Events, each distinct one sent once (bounded memory of what was sent).

    Once started, Events are written by one sender thread, as client-go's recorder writes them:
    a prepare or repair never waits on an Event write (four per prepare: its Pod and claim, two
    phases). Before `start` and after `close`, `emit` writes inline.
    """

    def __init__(
        self,
        sink: EventSink,
        *,
        host: str,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        remember: int = REMEMBERED_EVENTS,
        queued: int = QUEUED_EVENTS,
    ) -> None:
        self._sink = sink
        self._host = host
        self._clock = clock
        self._remember = remember
        self._sent: OrderedDict[tuple[str, str, str, str], None] = OrderedDict()
        self._lock = threading.Lock()
        self._queue: queue.Queue[_Pending | None] = queue.Queue(queued)
        self._sender: threading.Thread | None = None

    def start(self) -> EventRecorder:
        """Write Events from a sender thread from now on."""
        with self._lock:
            if self._sender is None:
                self._sender = threading.Thread(target=self._send_queued, name="events", daemon=True)
                self._sender.start()
        return self

    def close(self, timeout: float) -> None:
        """Write what is queued (within `timeout`), then stop the sender; later Events go inline."""
        with self._lock:
            sender, self._sender = self._sender, None
        if sender is not None:
            self._queue.put(None)
            sender.join(timeout)

    def emit(self, obj: InvolvedObject, type_: str, reason: str, message: str) -> bool:
        """Send (or queue) unless this exact event was already sent; True when it went out now."""
        key = (obj.uid, type_, reason, message)
        with self._lock:
            if key in self._sent:
                self._sent.move_to_end(key)
                return False
            self._sent[key] = None
            while len(self._sent) > self._remember:
                self._sent.popitem(last=False)
            queued = self._sender is not None
        pending = _Pending(
            key, obj, event_body(obj, type_, reason, message, host=self._host, now=self._clock())
        )
        if not queued:
            return self._send(pending)
        try:
            self._queue.put_nowait(pending)
        except queue.Full:
            self._unsent(pending, "the Event queue is full")
            return False
        return True

    def _send_queued(self) -> None:
        while (pending := self._queue.get()) is not None:
            self._send(pending)

    def _send(self, pending: _Pending) -> bool:
        try:
            self._sink.create_event(pending.obj.namespace, pending.body)
        except Exception as exc:  # events are diagnostics: never fail an operation over one
            self._unsent(pending, str(exc))
            return False
        return True

    def _unsent(self, pending: _Pending, why: str) -> None:
        with self._lock:
            self._sent.pop(pending.key, None)  # so a later identical Event is tried again
        obj = pending.obj
        log.warning(
            "could not record event %s on %s %s/%s: %s",
            pending.body["reason"],
            obj.kind,
            obj.namespace,
            obj.name,
            why,
        )


@dataclass(frozen=True)
class _Pending:
    key: tuple[str, str, str, str]
    obj: InvolvedObject
    body: dict[str, Any]
