"""What happens to a managed binding, told (spec 18.2: Pod/claim UIDs, devices and binding IDs,
never a CNI config): every durable phase change and every failed operation of a managed claim
becomes a structured log line, a failure metric and Events on the Pod and on the claim.

Messages name the binding by IDs, device, PCI address, source and shadow; they never carry CNI
configuration or IPAM material. The Events go out through sriov_dra.observe.eventrecorder.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final, Protocol

from sriov_contract.errors import ReasonedError
from sriov_contract.identity import shadow_name_for
from sriov_dra.apierrors import ApiError
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.kubeletplugin.api import ClaimRef
from sriov_dra.observe.eventrecorder import NORMAL, WARNING, EventRecorder, InvolvedObject

if TYPE_CHECKING:
    from sriov_dra.observe.metrics import DriverMetrics

log = logging.getLogger(__name__)


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
