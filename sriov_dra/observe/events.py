"""Kubernetes Events and structured logs for managed-binding transitions and failures (spec 18.2:
Pod/claim UIDs, devices and binding IDs, never a CNI config).

Each transition or failure is reported on the Pod and on the claim. An identical event (same
object, type, reason and message) is sent once: a repair loop that keeps meeting the same
problem must not flood the API server. Messages name the binding by IDs, device, PCI address,
source and shadow; they never carry CNI configuration or IPAM material.
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
from typing import TYPE_CHECKING, Any, Final, Protocol

from sriov_contract.errors import ReasonedError
from sriov_contract.identity import shadow_name_for
from sriov_dra.apierrors import ApiError
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.kubeletplugin.api import ClaimRef
from sriov_dra.ports import EventSink

if TYPE_CHECKING:
    from sriov_dra.observe.metrics import DriverMetrics

log = logging.getLogger(__name__)

COMPONENT: Final = "sriov-dra-driver"
NORMAL: Final = "Normal"
WARNING: Final = "Warning"
REMEMBERED_EVENTS: Final = 4096
# Events waiting for the sender; a burst beyond this is dropped (and logged), never waited for.
QUEUED_EVENTS: Final = 1024


class PhaseObserver(Protocol):
    """Told about every durable phase change and every failed operation of a managed claim."""

    def phase(self, record: ClaimRecord, phase: str) -> None: ...

    def failed(
        self, operation: str, ref: ClaimRef, record: ClaimRecord | None, error: ReasonedError
    ) -> None: ...


class _Silent:
    def phase(self, record: ClaimRecord, phase: str) -> None:
        pass

    def failed(self, operation: str, ref: ClaimRef, record: ClaimRecord | None, error: ReasonedError) -> None:
        pass


NULL_OBSERVER: Final[PhaseObserver] = _Silent()


@dataclass(frozen=True)
class InvolvedObject:
    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str


def claim_object(namespace: str, name: str, uid: str) -> InvolvedObject:
    return InvolvedObject("ResourceClaim", "resource.k8s.io/v1", namespace, name, uid)


def pod_object(record: ClaimRecord) -> InvolvedObject | None:
    """The claim's Pod, named by the first managed binding (all of a claim's share one Pod)."""
    for device in record.devices:
        binding = device.managed_binding or {}
        if binding.get("podName"):
            return InvolvedObject(
                "Pod", "v1", str(binding.get("podNamespace")), str(binding["podName"]), record.pod_uid
            )
    return None


def describe_bindings(record: ClaimRecord) -> str:
    """Binding IDs, devices, PCI addresses, sources and shadows: what an operator needs, no config."""
    parts = []
    for device in record.devices:
        binding = device.managed_binding or {}
        source = binding.get("source") or {}
        attachment = str(binding.get("attachmentID", ""))
        shadow = shadow_name_for(attachment) if attachment else "-"
        parts.append(
            f"{device.device} ({device.pci_address}, {binding.get('interface', '-')}) "
            f"source {source.get('namespace', '-')}/{source.get('name', '-')} shadow {shadow}"
        )
    return "; ".join(parts) or "no devices of this driver"


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


class BindingReporter:
    """The PhaseObserver of a running agent: a structured log line, Events, and failure metrics."""

    def __init__(self, events: EventRecorder | None, metrics: DriverMetrics | None) -> None:
        self._events = events
        self._metrics = metrics

    def phase(self, record: ClaimRecord, phase: str) -> None:
        log.info(
            "managed binding %s: pod_uid=%s claim_uid=%s claim=%s/%s bindings=%s",
            phase,
            record.pod_uid,
            record.claim_uid,
            record.namespace,
            record.name,
            _binding_ids(record),
        )
        message = (
            f"claim {record.namespace}/{record.name} network binding {phase}: {describe_bindings(record)}"
        )
        self._emit(record, None, NORMAL, f"Binding{phase}", message)

    def failed(self, operation: str, ref: ClaimRef, record: ClaimRecord | None, error: ReasonedError) -> None:
        log.warning(
            "managed %s failed: reason=%s pod_uid=%s claim_uid=%s claim=%s/%s bindings=%s: %s",
            operation,
            error.reason,
            record.pod_uid if record else "",
            ref.uid,
            ref.namespace,
            ref.name,
            _binding_ids(record) if record else "",
            error.message,
        )
        if self._metrics is not None:
            status = error.status if isinstance(error, ApiError) else None
            self._metrics.failure(operation, error.reason, status)
        self._emit(
            record,
            ref,
            WARNING,
            error.reason,
            f"{operation} of claim {ref.namespace}/{ref.name}: {error.message}",
        )

    def _emit(
        self, record: ClaimRecord | None, ref: ClaimRef | None, type_: str, reason: str, message: str
    ) -> None:
        if self._events is None:
            return
        targets = []
        if record is not None:
            targets.append(claim_object(record.namespace, record.name, record.claim_uid))
            pod = pod_object(record)
            if pod is not None:
                targets.append(pod)
        elif ref is not None:
            targets.append(claim_object(ref.namespace, ref.name, ref.uid))
        for target in targets:
            self._events.emit(target, type_, reason, message)


def _binding_ids(record: ClaimRecord) -> str:
    return ",".join(f"{d.device}={(d.managed_binding or {}).get('attachmentID', '')}" for d in record.devices)
