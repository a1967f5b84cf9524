"""The daemon's Prometheus metrics, on a registry of its own so tests can read them in-process."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

PREFIX = "cni_shim_daemon"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            f"{PREFIX}_requests",
            "CNI requests served, by command and result (ok, or the error reason)",
            ["command", "result"],
            registry=self.registry,
        )
        self._latency = Histogram(
            f"{PREFIX}_request_duration_seconds",
            "Time from request to answer, by command",
            ["command"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self._live_reads = Counter(
            f"{PREFIX}_live_api_reads",
            "Live API GETs made for requests, by kind (pod, nad)",
            ["kind"],
            registry=self.registry,
        )
        self._cache_reads = Counter(
            f"{PREFIX}_cache_reads",
            "Informer cache lookups for requests, by kind and result (hit, miss)",
            ["kind", "result"],
            registry=self.registry,
        )
        self._pod_events = Counter(
            f"{PREFIX}_pod_events",
            "Pod Events (AddedInterface, NoNetworkFound) by outcome (written, failed, dropped, filtered)",
            ["result"],
            registry=self.registry,
        )
        self._lists = Counter(
            f"{PREFIX}_informer_lists",
            "Full lists by informer kind (pod, nad) and cause (start; expired: the watch got 410 "
            "Gone; failed: the API server was unreachable or refused)",
            ["kind", "cause"],
            registry=self.registry,
        )
        self._cached = Gauge(
            f"{PREFIX}_cached_objects", "Objects held by each informer", ["kind"], registry=self.registry
        )

    def request(self, command: str, result: str, seconds: float) -> None:
        self._requests.labels(command, result).inc()
        self._latency.labels(command).observe(seconds)

    def live_read(self, kind: str) -> None:
        self._live_reads.labels(kind).inc()

    def cache_read(self, kind: str, *, hit: bool) -> None:
        self._cache_reads.labels(kind, "hit" if hit else "miss").inc()

    def pod_event(self, result: str) -> None:
        self._pod_events.labels(result).inc()

    def informer_list(self, kind: str, cause: str) -> None:
        self._lists.labels(kind, cause).inc()

    def track_cache(self, kind: str, size: Callable[[], int]) -> None:
        self._cached.labels(kind).set_function(size)

    def serve(self, address: str) -> None:
        """Expose /metrics on host:port (":9091" means every address)."""
        host, _, port = address.rpartition(":")
        start_http_server(int(port), addr=host.strip("[]") or "0.0.0.0", registry=self.registry)  # noqa: S104
