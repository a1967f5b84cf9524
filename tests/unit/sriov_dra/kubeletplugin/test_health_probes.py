"""The driver's liveness and readiness as kubelet's gRPC probes see them: readiness waits for the
registration, a busy driver still answers, a stuck call or a stopped process fails the probe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from sriov_dra.kubeletplugin import health as health_module
from sriov_dra.kubeletplugin.api import ClaimRef, PrepareOutcome
from sriov_dra.kubeletplugin.gen import health_v1_pb2
from sriov_dra.kubeletplugin.health import HealthServer
from sriov_dra.kubeletplugin.server import DRA_WORKERS, KubeletPlugin, SocketPaths
from testbed.waiting import wait_for
from tests.support.kubelet import health_check

SERVING = health_v1_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_v1_pb2.HealthCheckResponse.NOT_SERVING
# Far below the probes' timeoutSeconds: an answer that needs the held turn would miss it.
PROBE_DEADLINE = 3.0


def check(port: int, service: str, timeout: float = PROBE_DEADLINE) -> int:
    return health_check(port, service, timeout)


class HeldService:
    """Every non-empty prepare blocks until released, like a slow prepare holding its turn."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        if claims:
            self.entered.set()
            self.release.wait(30)
        return {c.uid: PrepareOutcome(error="held") for c in claims}

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        return {c.uid: "" for c in claims}


@pytest.fixture
def served(kubelet_dirs) -> Iterator[tuple[KubeletPlugin, HealthServer, HeldService]]:
    service = HeldService()
    paths = SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins)
    plugin = KubeletPlugin(paths, service)
    health = HealthServer(paths, 0, registration=plugin.registration, calls=plugin.calls)
    try:
        yield plugin, health, service
    finally:
        service.release.set()
        health.stop()
        plugin.stop(0)


def test_readiness_follows_the_registration_and_liveness_does_not(served, kubelet_dirs, fake_kubelet_factory):
    _, health, _ = served
    assert check(health.port, "readiness") == NOT_SERVING  # kubelet has not registered us yet
    assert check(health.port, "liveness") == SERVING
    kubelet = fake_kubelet_factory(kubelet_dirs.registry)
    kubelet.register()
    assert check(health.port, "readiness") == SERVING
    with pytest.raises(grpc.RpcError):
        kubelet.notify(False, "version skew")
    assert check(health.port, "readiness") == NOT_SERVING
    assert check(health.port, "liveness") == SERVING


def test_a_busy_driver_answers_both_probes(served, kubelet_dirs, fake_kubelet_factory) -> None:
    """More kubelet calls than the old pool had workers, one holding the turn: the probe's empty
    request neither waits for the turn nor for a worker."""
    _, health, service = served
    kubelet = fake_kubelet_factory(kubelet_dirs.registry)
    kubelet.register()
    calls = DRA_WORKERS // 2
    with ThreadPoolExecutor(calls) as pool:
        pending = [pool.submit(kubelet.prepare, [("ns", f"c{i}", f"u{i}")]) for i in range(calls)]
        assert service.entered.wait(10)
        assert check(health.port, "liveness") == SERVING
        assert check(health.port, "readiness") == SERVING
        assert not any(p.done() for p in pending)
        service.release.set()
        assert all(p.result(30)[f"u{i}"].error == "held" for i, p in enumerate(pending))


def test_a_call_stuck_in_its_turn_fails_liveness(served, kubelet_dirs, fake_kubelet_factory, monkeypatch):
    _, health, service = served
    monkeypatch.setattr(health_module, "WEDGED_AFTER", 0.0)
    kubelet = fake_kubelet_factory(kubelet_dirs.registry)
    kubelet.register()
    with ThreadPoolExecutor(1) as pool:
        stuck = pool.submit(kubelet.prepare, [("ns", "c", "u")])
        assert service.entered.wait(10)
        assert check(health.port, "liveness") == NOT_SERVING
        assert check(health.port, "readiness") == NOT_SERVING
        service.release.set()
        stuck.result(30)
    assert check(health.port, "liveness") == SERVING


_DRIVER = textwrap.dedent(
    """
    import sys, threading
    from pathlib import Path
    from sriov_dra.kubeletplugin.health import HealthServer
    from sriov_dra.kubeletplugin.server import KubeletPlugin, SocketPaths

    class Idle:
        def prepare(self, claims):
            return {}

        def unprepare(self, claims):
            return {}

    paths = SocketPaths(Path(sys.argv[1]), Path(sys.argv[2]))
    plugin = KubeletPlugin(paths, Idle())
    health = HealthServer(paths, 0, registration=plugin.registration, calls=plugin.calls)
    print(health.port, flush=True)
    threading.Event().wait()
    """
)


@pytest.fixture
def driver_process(kubelet_dirs) -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(kubelet_dirs.registry), str(kubelet_dirs.plugins)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc, int(proc.stdout.readline())
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(10)


def _deadline_exceeded(port: int, service: str) -> Any:
    try:
        check(port, service, timeout=1.0)
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    return False


def test_a_stopped_driver_fails_both_probes_and_passes_once_it_runs(
    driver_process, kubelet_dirs, fake_kubelet_factory
) -> None:
    proc, port = driver_process
    fake_kubelet_factory(kubelet_dirs.registry).register()
    assert check(port, "readiness") == SERVING
    os.kill(proc.pid, signal.SIGSTOP)
    assert _deadline_exceeded(port, "liveness")
    assert _deadline_exceeded(port, "readiness")
    os.kill(proc.pid, signal.SIGCONT)
    assert wait_for(lambda: check(port, "liveness") == SERVING, 10, what="liveness after SIGCONT")
    assert check(port, "readiness") == SERVING
