"""The daemon's request calls on kept-alive sockets: reused in turn, one per concurrent caller,
and every failure still a ApiError in the wording the daemon always used.

A real HTTP/1.1 server on loopback stands in for the API server (plain HTTP: the TLS side is
ssl_context's, which the integration and fault suites exercise against the real API server).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cni_shim.errors import ApiError
from cni_shim.kube import daemon_client
from cni_shim.kube.daemon_client import ApiServer, Sockets
from cni_shim.kube.kubeconfig import Connection
from tests.support.httpjson import send_json


class _Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: set[int]
    agents: set[str]
    gate: threading.Barrier | None = None
    puts: list[dict[str, Any]]

    def setup(self) -> None:
        super().setup()
        self.connections.add(id(self.connection))

    def do_GET(self) -> None:
        self.agents.add(self.headers["User-Agent"])
        if self.gate is not None:
            self.gate.wait(5)  # every caller is in flight at once
        if self.path.endswith("/missing"):
            send_json(self, 404, {"kind": "Status", "message": "not found"})
        elif self.path.endswith("/forbidden"):
            send_json(self, 403, {"kind": "Status", "message": "pods is forbidden"})
        else:
            send_json(self, 200, {"metadata": {"name": self.path.rsplit("/", 1)[1]}})

    def do_PUT(self) -> None:
        size = int(self.headers["Content-Length"])
        self.puts.append(json.loads(self.rfile.read(size)))
        send_json(self, 409, {"kind": "Status", "message": "the object has been modified"})

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[ApiServer, type[_Api]]]:
    handler = type("Api", (_Api,), {"connections": set(), "agents": set(), "puts": [], "gate": None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    conn = Connection(server=url, token="t0ken")
    try:
        yield ApiServer(None, url, sockets=Sockets(conn, timeout=5.0)), handler
    finally:
        server.shutdown()
        server.server_close()


def test_calls_in_turn_share_one_kept_alive_connection(api):
    client, handler = api
    for name in ("a", "b", "c"):
        assert client.get(f"/api/v1/namespaces/ns/pods/{name}", f"pod ns/{name}") == {
            "metadata": {"name": name}
        }
    assert len(handler.connections) == 1
    assert handler.agents == {"cni-shim-daemon"}  # the daemon, not the thin shim, in audit logs


def test_concurrent_callers_each_get_their_own_connection(api):
    client, handler = api
    handler.gate = threading.Barrier(3)
    answers: list[Any] = []
    threads = [
        threading.Thread(target=lambda n=n: answers.append(client.get(f"/p/{n}", f"pod {n}")))
        for n in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(a["metadata"]["name"] for a in answers) == ["0", "1", "2"]
    assert len(handler.connections) == 3


def test_at_most_the_pool_size_stays_idle(api, monkeypatch):
    client, handler = api
    monkeypatch.setattr(daemon_client, "NAD_POOL", 1)
    handler.gate = threading.Barrier(2)
    threads = [threading.Thread(target=client.get, args=(f"/p/{n}", "pod")) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    handler.gate = None
    client.get("/p/again", "pod")
    client.get("/p/again", "pod")
    assert len(handler.connections) == 2  # the one kept was reused, the other closed


def test_answers_map_to_the_daemons_errors(api):
    client, handler = api
    assert client.get("/p/missing", "pod ns/missing") is None
    with pytest.raises(ApiError) as denied:
        client.get("/p/forbidden", "pod ns/forbidden")
    assert (denied.value.message, denied.value.status) == (
        "GET pod ns/forbidden returned HTTP 403: pods is forbidden",
        403,
    )
    with pytest.raises(ApiError) as conflict:
        client.put("/p/a/status", {"metadata": {"name": "a"}}, "status of pod ns/a")
    assert (conflict.value.message, conflict.value.status) == (
        "PUT status of pod ns/a failed: HTTP 409: the object has been modified",
        409,
    )
    assert handler.puts == [{"metadata": {"name": "a"}}]


def test_an_unreachable_server_is_status_zero_in_the_daemons_wording():
    conn = Connection(server="http://127.0.0.1:9")  # discard port: nothing listens
    client = ApiServer(None, conn.server, sockets=Sockets(conn, timeout=2.0))
    with pytest.raises(ApiError) as failed:
        client.get("/p/a", "pod ns/a")
    assert failed.value.message.startswith("GET /p/a on http://127.0.0.1:9 failed: ")
    assert failed.value.status == 0
