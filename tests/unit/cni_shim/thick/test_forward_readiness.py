"""The shim sends its request at once; a daemon that is absent or not ready ran nothing, so it waits and resends."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cni_shim import main
from cni_shim.thick import forward
from cni_shim.thick.dispatch import Answer
from cni_shim.thick.server import Reply, Server, State, listen
from tests.support.cni_daemon import SHIM_ENV as ENV

RESULT = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0"}]}


class ReadyAfterFirstLook(threading.Event):
    """Not ready for the first question (the shim's /cni), ready from the second on (its /readyz)."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def is_set(self) -> bool:
        self.looks += 1
        if self.looks > 1:
            self.set()
        return super().is_set()


class Daemon:
    def __init__(self, socket_dir: Path, state: State) -> None:
        self.socket_dir = socket_dir
        self.state = state
        self.paths: list[str] = []
        self.served: list[bytes] = []
        self._servers: list[Server] = []

    def start(self) -> None:
        def serve(body: bytes) -> Answer:
            self.served.append(body)
            return Answer(200, json.dumps({"Result": RESULT}).encode(), "ok")

        server = listen(str(self.socket_dir), serve, self.state, None)
        route = server.route

        def recording(method: str, path: str, body: bytes) -> Reply:
            self.paths.append(f"{method} {path}")
            return route(method, path, body)

        server.route = recording  # type: ignore[method-assign]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._servers.append(server)

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def conf(self) -> bytes:
        return json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "n",
                "type": "cni-shim",
                "daemonSocketDir": str(self.socket_dir),
                "daemonReadyTimeout": 20,
            }
        ).encode()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    state = State()
    running = Daemon(tmp_path / "sock", state)
    yield running
    running.stop()


def test_a_ready_daemon_gets_one_connection_per_request(daemon):
    daemon.state.ready.set()
    daemon.start()
    status, out, _ = main.run(ENV, daemon.conf)
    assert (status, json.loads(out)) == (0, RESULT)
    assert daemon.paths == ["POST /cni"]
    assert len(daemon.served) == 1


def test_a_daemon_not_ready_yet_runs_nothing_and_the_shim_resends_once_it_is(daemon):
    daemon.state.ready = ReadyAfterFirstLook()
    daemon.start()
    status, out, _ = main.run(ENV, daemon.conf)
    assert (status, json.loads(out)) == (0, RESULT)
    assert daemon.paths == ["POST /cni", "GET /readyz", "POST /cni"]
    assert len(daemon.served) == 1


def test_the_not_ready_answer_is_try_again_later_cni_error_json(daemon):
    daemon.start()
    sock = str(daemon.socket_dir / forward.SOCKET_NAME)
    status, body = forward.exchange(sock, "POST", "/cni", b"{}", 5)
    doc = json.loads(body)
    assert (status, doc["code"]) == (forward.NOT_READY, 11)
    assert doc["details"] == "DaemonNotReady"
    assert daemon.served == []


def test_a_daemon_that_starts_listening_later_gets_the_request_once(daemon):
    daemon.state.ready.set()
    outcome: list[tuple[int, str, str]] = []
    shim = threading.Thread(target=lambda: outcome.append(main.run(ENV, daemon.conf)))
    shim.start()
    daemon.start()
    shim.join(30)
    ((status, out, _),) = outcome
    assert (status, json.loads(out)) == (0, RESULT)
    assert daemon.paths[-1] == "POST /cni"
    assert len(daemon.served) == 1


def test_a_daemon_that_never_becomes_ready_is_unavailable_within_the_budget(tmp_path):
    state = State()
    running = Daemon(tmp_path / "sock", state)
    running.start()
    try:
        conf = json.loads(running.conf())
        conf["daemonReadyTimeout"] = 0.3
        status, out, _ = main.run(ENV, lambda: json.dumps(conf).encode())
    finally:
        running.stop()
    doc = json.loads(out)
    assert (status, doc["code"]) == (1, 11)
    assert doc["details"] == "DaemonUnavailable"
    assert "not ready within 0.3s" in doc["msg"]
    assert running.served == []
