"""HTTP over the daemon's unix socket: Multus's `/cni`, `/healthz` and `/readyz` endpoints.

One request per connection (answered as HTTP/1.0, then closed), so requests for different
containers run in parallel; the dispatcher serializes those for one container. Until the daemon
is ready (and again while it drains) `/cni` answers 503 without running anything.

Worker threads each block in accept() on the listening socket and serve the connection they
get, so a request is neither handed from an acceptor to a new thread nor parsed by `http.server`
(its thread start and email-based header parsing were over a millisecond of every request on a
busy node). A worker that takes the last idle place starts another before it serves, so there is
always one accepting and concurrency stays unbounded; workers beyond SPARE_WORKERS idle ones end
when their request is done. The request is parsed by hand: a request line, headers (only
Content-Length and Expect matter), a body of at most MAX_BODY bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable
from http import HTTPStatus
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
# Idle workers kept waiting in accept(); more start only while requests overlap.
SPARE_WORKERS = 2
# A connection that sends no complete request in this long frees its worker.
READ_TIMEOUT = 60.0
MAX_HEAD = 64 * 1024
_TEXT = "text/plain"


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


class Reply:
    """One answer; `after` runs once it is sent (the request's Pod Events go to their queue)."""

    __slots__ = ("after", "body", "content_type", "status")

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        content_type: str = "application/json",
        after: Callable[[], None] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.after = after

    def encode(self) -> bytes:
        phrase = HTTPStatus(self.status).phrase
        head = (
            f"HTTP/1.0 {self.status} {phrase}\r\nContent-Type: {self.content_type}\r\n"
            f"Content-Length: {len(self.body)}\r\n\r\n"
        )
        return head.encode() + self.body


class _Once:
    __slots__ = ("_call", "_done")

    def __init__(self, call: Callable[[], None]) -> None:
        self._call = call
        self._done = False

    def __call__(self) -> None:
        if not self._done:
            self._done = True
            self._call()


class BadRequest(Exception):
    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply


def read_request(conn: socket.socket) -> tuple[str, str, bytes] | None:
    """(method, path, body) of the one request on `conn`; None when the peer went away first."""
    data = b""
    while (end := data.find(b"\r\n\r\n")) < 0:
        if len(data) > MAX_HEAD:
            raise BadRequest(Reply(431, b"request headers too large\n", _TEXT))
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    lines = data[:end].split(b"\r\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
        raise BadRequest(Reply(400, b"malformed request line\n", _TEXT))
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise BadRequest(Reply(400, b"malformed header line\n", _TEXT))
        headers[name.strip().lower()] = value.strip()
    try:
        size = int(headers.get(b"content-length", b"0"))
    except ValueError:
        size = -1
    if size < 0 or size > MAX_BODY:
        raise BadRequest(Reply(413, f"request body must be 0..{MAX_BODY} bytes\n".encode(), _TEXT))
    if headers.get(b"expect", b"").lower() == b"100-continue" and parts[2] != b"HTTP/1.0":
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    body = data[end + 4 : end + 4 + size]
    while len(body) < size:
        chunk = conn.recv(min(65536, size - len(body)))
        if not chunk:
            return None
        body += chunk
    return parts[0].decode("latin-1"), parts[1].decode("latin-1").split("?", 1)[0], body


class Server:
    """The listening socket and its workers; serve_forever / shutdown / server_close as socketserver's."""

    def __init__(
        self,
        listener: socket.socket,
        serve_cni: Callable[[bytes], Answer],
        state: State,
        hooks: Hooks | None,
        spare: int = SPARE_WORKERS,
    ) -> None:
        self._listener = listener
        self._serve_cni = serve_cni
        self._state = state
        self._hooks = hooks
        self._spare = max(1, spare)
        self._lock = threading.Lock()
        self._idle = 0
        self._stopped = threading.Event()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Serve until shutdown(); `poll_interval` is accepted for socketserver's signature only."""
        del poll_interval  # the workers block in accept(); shutdown() wakes them
        for _ in range(self._spare):
            self._start_worker()
        self._stopped.wait()

    def shutdown(self) -> None:
        """Stop accepting (requests in flight finish on their own) and end serve_forever."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            # On Linux this wakes every thread blocked in accept() with EINVAL.
            self._listener.shutdown(socket.SHUT_RDWR)

    def server_close(self) -> None:
        self._stopped.set()
        self._listener.close()

    def _start_worker(self) -> None:
        threading.Thread(target=self._work, name="cni-request", daemon=True).start()

    def _work(self) -> None:
        with self._lock:
            self._idle += 1
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                with self._lock:
                    self._idle -= 1
                return  # the listener was shut down or closed
            with self._lock:
                self._idle -= 1
                grow = self._idle == 0
            if grow and not self._stopped.is_set():
                self._start_worker()  # someone must be accepting while this request runs
            back = _Once(self._back)
            with conn:
                self._handle(conn, back)
            back()
            with self._lock:
                if self._idle > self._spare:
                    self._idle -= 1
                    return  # enough others are waiting; this one was started for a burst

    def _back(self) -> None:
        with self._lock:
            self._idle += 1

    def _handle(self, conn: socket.socket, back: Callable[[], None]) -> None:
        """Serve one connection; `back` counts this worker idle again just before the answer goes
        out, so the runtime's next request, which may come before this thread is in accept()
        again, does not make it start a worker for nothing."""
        try:
            conn.settimeout(READ_TIMEOUT)
            try:
                request = read_request(conn)
            except BadRequest as bad:
                back()
                conn.sendall(bad.reply.encode())
                return
            if request is None:
                return
            try:
                reply = self.route(*request)
            except Exception as exc:  # a bug costs its request, never the worker serving it
                reply = Reply(500, f"cni-shim-daemon failed: {type(exc).__name__}: {exc}\n".encode(), _TEXT)
            conn.settimeout(None)  # the answer is small; never cut it off
            back()
            conn.sendall(reply.encode())
        except OSError:
            # The shim gave up (its timeout); the outcome is in the log and the delegate cache,
            # and the runtime's retry or DEL finds it there.
            return
        if reply.after is not None:
            reply.after()

    def route(self, method: str, path: str, body: bytes) -> Reply:
        state = self._state
        if method not in ("GET", "POST"):
            return Reply(501, f"Unsupported method ({method!r})\n".encode(), _TEXT)
        if path == "/healthz":
            return Reply(200)
        if path == "/readyz":
            return Reply(200 if state.ready.is_set() else 500)
        if path == "/cni":
            if method != "POST":
                return Reply(405, b"Method not allowed\n", _TEXT)
            if not state.ready.is_set():
                # The shim sends without asking /readyz first; this answer tells it nothing ran,
                # so waiting for readiness and sending again is safe.
                return Reply(NOT_READY, _NOT_READY_BODY)
            with state.busy():
                answer = self._serve_cni(body)
            return Reply(answer.status, answer.body, after=answer.after)
        if self._hooks is not None and path == HOOKS_PATH:
            return Reply(200, json.dumps(self._hooks.snapshot()).encode())
        if self._hooks is not None and path == FREEZE_PATH and method == "POST":
            self._hooks.freeze()
            return Reply(200)
        return Reply(404, b"404 page not found\n", _TEXT)


def listen(
    socket_dir: str, serve_cni: Callable[[bytes], Answer], state: State, hooks: Hooks | None
) -> Server:
    """Bind <socket_dir>/cni-shim.sock: directory 0700, socket 0600, a stale socket replaced."""
    os.makedirs(socket_dir, mode=0o700, exist_ok=True)
    os.chmod(socket_dir, 0o700)
    path = os.path.join(socket_dir, SOCKET_NAME)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # The socket must never exist with looser permissions, not even between bind and chmod.
    old = os.umask(0o177)
    try:
        listener.bind(path)
    except OSError:
        listener.close()
        raise
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    listener.listen(128)
    return Server(listener, serve_cni, state, hooks)
