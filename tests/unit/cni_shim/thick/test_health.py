"""Kubelet's probes of the daemon (cni_shim.thick.health): each a round trip through the socket the
shim dials, answered while CNI requests are running."""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cni_shim.thick import forward
from cni_shim.thick.dispatch import Answer
from cni_shim.thick.health import HealthServer
from cni_shim.thick.server import Server, State, listen


class Daemon:
    """The socket server with a CNI handler that blocks until released."""

    def __init__(self, socket_dir: Path) -> None:
        self.state = State()
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.server: Server = listen(str(socket_dir), self._serve, self.state, None)
        self.socket_path = str(socket_dir / forward.SOCKET_NAME)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _serve(self, body: bytes) -> Answer:
        self.entered.release()
        self.release.wait(30)
        return Answer(200, b"{}", "ok")

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self._thread.join(5)
        self.server.server_close()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = Daemon(tmp_path / "sock")
    yield d
    d.close()


@pytest.fixture
def health(daemon: Daemon) -> Iterator[HealthServer]:
    h = HealthServer("127.0.0.1:0", daemon.socket_path, timeout=2.0)
    yield h
    h.stop()


def probe(port: int, path: str, host: str = "127.0.0.1") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def test_readiness_is_the_daemons_own_and_liveness_only_needs_it_serving(daemon, health) -> None:
    assert probe(health.port, "/healthz") == (200, "ok\n")
    status, line = probe(health.port, "/readyz")
    assert (status, line) == (503, f"/readyz through {daemon.socket_path} answered 500\n")
    daemon.state.ready.set()
    assert probe(health.port, "/readyz") == (200, "ok\n")
    assert probe(health.port, "/metrics")[0] == 404


def test_a_socket_the_shim_cannot_dial_fails_both(daemon, health) -> None:
    daemon.state.ready.set()
    os.unlink(daemon.socket_path)
    for path in ("/healthz", "/readyz"):
        status, line = probe(health.port, path)
        assert status == 503
        assert line.startswith(f"{path} through {daemon.socket_path}: "), line


def test_probes_answer_while_cni_requests_run(daemon, health) -> None:
    daemon.state.ready.set()
    running = 8
    with ThreadPoolExecutor(running) as pool:
        pending = [
            pool.submit(forward.exchange, daemon.socket_path, "POST", "/cni", b"{}", 30.0)
            for _ in range(running)
        ]
        for _ in range(running):
            assert daemon.entered.acquire(timeout=10)
        assert probe(health.port, "/healthz") == (200, "ok\n")
        assert probe(health.port, "/readyz") == (200, "ok\n")
        assert not any(p.done() for p in pending)
        daemon.release.set()
        assert [p.result(30)[0] for p in pending] == [200] * running


def test_an_ipv6_node_address_is_served(daemon) -> None:
    """$(POD_IP) of a host-network Pod on an IPv6 cluster is an IPv6 address."""
    h = HealthServer("::1:0", daemon.socket_path, timeout=2.0)
    try:
        assert probe(h.port, "/healthz", host="[::1]") == (200, "ok\n")
    finally:
        h.stop()
