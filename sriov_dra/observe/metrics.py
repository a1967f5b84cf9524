"""The node agent's Prometheus metrics (spec 18.2: bindings by phase, failures by bounded reason,
repair latency).

Labels stay bounded: operations and phases are fixed sets and a failure is labelled by its
stable reason code, folded into "Other" once too many distinct codes were seen. Pod, claim and
binding IDs belong in logs and events, never in labels.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sriov_dra.core.bindingrecord import PHASES
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.ports import SliceApi

MAX_REASONS: Final = 64
OTHER_REASON: Final = "Other"
_REASON = re.compile(r"[A-Z][A-Za-z0-9]{0,63}")


class _BindingPhases(Collector):
    """Bindings by phase, counted from the checkpoint at scrape time, so it never drifts."""

    def __init__(self, snapshot: Callable[[], Sequence[ClaimRecord]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = dict.fromkeys(sorted(PHASES), 0)
        for record in self._snapshot():
            for device in record.devices:
                phase = (device.managed_binding or {}).get("phase")
                if phase in counts:
                    counts[str(phase)] += 1
        family = GaugeMetricFamily(
            "sriov_dra_bindings", "Managed network bindings in the checkpoint, by phase", labels=["phase"]
        )
        for phase, n in counts.items():
            family.add_metric([phase], n)
        yield family


class _UnhealthyDevices(Collector):
    def __init__(self, count: Callable[[], int]) -> None:
        self._count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "sriov_dra_unhealthy_devices",
            "VFs now Unhealthy (tainted NoSchedule and reported to the kubelet): PF link down or VF gone",
            value=self._count(),
        )


class DriverMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._reasons: set[str] = set()
        self._lock = threading.Lock()
        self.failures = Counter(
            "sriov_dra_failures_total",
            "Failed prepare, repair and cleanup attempts, by operation and bounded reason",
            ["operation", "reason"],
            registry=self.registry,
        )
        self.repair_seconds = Histogram(
            "sriov_dra_repair_duration_seconds",
            "Duration of one repair pass over every checkpointed claim",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.api_errors = Counter(
            "sriov_dra_api_errors_total",
            "Kubernetes API calls that failed, by HTTP status (0: no response)",
            ["status"],
            registry=self.registry,
        )
        self.checkpoint_recoveries = Counter(
            "sriov_dra_checkpoint_recoveries_total",
            "Starts from a damaged checkpoint, by the generation started from (previous or empty)",
            ["generation"],
            registry=self.registry,
        )
        self.device_health_changes = Counter(
            "sriov_dra_device_health_changes_total",
            "VF health changes seen by the device health monitor, by the new health and reason",
            ["health", "reason"],
            registry=self.registry,
        )
        self.slice_writes = Counter(
            "sriov_dra_resourceslice_writes_total",
            "ResourceSlice writes made while publishing this node's devices",
            ["operation"],
            registry=self.registry,
        )

    def watch_bindings(self, snapshot: Callable[[], Sequence[ClaimRecord]]) -> None:
        self.registry.register(_BindingPhases(snapshot))

    def watch_unhealthy(self, count: Callable[[], int]) -> None:
        """sriov_dra_unhealthy_devices, read from the device health monitor at scrape time."""
        self.registry.register(_UnhealthyDevices(count))

    def bounded_reason(self, reason: str) -> str:
        with self._lock:
            if reason in self._reasons:
                return reason
            if not _REASON.fullmatch(reason) or len(self._reasons) >= MAX_REASONS:
                return OTHER_REASON
            self._reasons.add(reason)
            return reason

    def failure(self, operation: str, reason: str, status: int | None = None) -> None:
        self.failures.labels(operation, self.bounded_reason(reason)).inc()
        if status is not None:
            self.api_errors.labels(str(status)).inc()

    def serve(self, port: int, addr: str = "0.0.0.0") -> int:  # noqa: S104 - scraped from outside the node
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return int(server.server_port)


class CountingSlices:
    """A SliceApi that counts the writes it forwards."""

    def __init__(self, inner: SliceApi, metrics: DriverMetrics) -> None:
        self._inner = inner
        self._writes = metrics.slice_writes

    def list(self) -> list[dict[str, Any]]:
        return self._inner.list()

    def create(self, body: Mapping[str, Any]) -> None:
        self._inner.create(body)
        self._writes.labels("create").inc()

    def replace(self, name: str, body: Mapping[str, Any]) -> None:
        self._inner.replace(name, body)
        self._writes.labels("replace").inc()

    def delete(self, name: str) -> None:
        self._inner.delete(name)
        self._writes.labels("delete").inc()
