"""HTTP over the daemon's unix socket: Multus's `/cni`, `/healthz` and `/readyz` endpoints.

Each connection gets its own thread and one request (HTTP/1.0, no keep-alive), so requests
for different containers run in parallel; the dispatcher serializes those for one container.
Until the daemon is ready (and again while it drains) `/cni` answers 503 without running anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from cni_shim.errors import TRY_AGAIN_LATER
from cni_shim.thick.dispatch import MAX_BODY, Answer
from cni_shim.thick.forward import NOT_READY, SOCKET_NAME

# Test hooks: only served when the daemon runs with --enable-test-hooks.
HOOKS_PATH = "/debug/informers"
FREEZE_PATH = "/debug/informers/freeze"
_NOT_READY_BODY = json.dumps(
    {
        "code": TRY_AGAIN_LATER,
        "msg": "cni-shim-daemon is starting or shutting down and ran nothing; retry",
        "details": "DaemonNotReady",
    }
).encode()


class State:
    """Readiness and in-flight requests, shared by the handler threads and the signal handler."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.ready = threading.Event()
        self._inflight = 0

    @contextlib.contextmanager
    def busy(self) -> Any:
        with self._lock:
            self._inflight += 1
        try:
            yield
        finally:
            with self._lock:
                self._inflight -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._lock:
            return self._idle.wait_for(lambda: self._inflight == 0, timeout)


class Hooks:
    """What the test hooks reach; absent in production."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]], freeze: Callable[[], None]) -> None:
        self.snapshot = snapshot
        self.freeze = freeze


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    serve_cni: Callable[[bytes], Answer]
    state: State
    hooks: Hooks | None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def _reply(self, status: int, body: bytes = b"", content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            # The shim gave up (its timeout); the outcome is in the log and the delegate cache,
            # and the runtime's retry or DEL finds it there.
            self.close_connection = True

    def _body(self) -> bytes | None:
        try:
            size = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            size = -1
        if size < 0 or size > MAX_BODY:
            self._reply(413, f"request body must be 0..{MAX_BODY} bytes\n".encode(), "text/plain")
            return None
        return self.rfile.read(size)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        state = self.server.state
        if path == "/healthz":
            self._reply(200)
        elif path == "/readyz":
            self._reply(200 if state.ready.is_set() else 500)
        elif path == "/cni":
            if method != "POST":
                self._reply(405, b"Method not allowed\n", "text/plain")
                return
            if not state.ready.is_set():
                # The shim sends without asking /readyz first; this answer tells it nothing ran,
                # so waiting for readiness and sending again is safe.
                self._reply(NOT_READY, _NOT_READY_BODY)
                return
            body = self._body()
            if body is None:
                return
            with state.busy():
                answer = self.server.serve_cni(body)
            self._reply(answer.status, answer.body)
            if answer.after is not None:
                answer.after()
        elif self.server.hooks is not None and path == HOOKS_PATH:
            self._reply(200, json.dumps(self.server.hooks.snapshot()).encode())
        elif self.server.hooks is not None and path == FREEZE_PATH and method == "POST":
            self.server.hooks.freeze()
            self._reply(200)
        else:
            self._reply(404, b"404 page not found\n", "text/plain")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the dispatcher logs every CNI request with its context; probes are not worth a line


def listen(
    socket_dir: str, serve_cni: Callable[[bytes], Answer], state: State, hooks: Hooks | None
) -> socketserver.UnixStreamServer:
    """Bind <socket_dir>/cni-shim.sock: directory 0700, socket 0600, a stale socket replaced."""
    os.makedirs(socket_dir, mode=0o700, exist_ok=True)
    os.chmod(socket_dir, 0o700)
    path = os.path.join(socket_dir, SOCKET_NAME)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    # The socket must never exist with looser permissions, not even between bind and chmod.
    old = os.umask(0o177)
    try:
        server = _Server(path, _Handler)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    server.serve_cni = serve_cni
    server.state = state
    server.hooks = hooks
    return server
