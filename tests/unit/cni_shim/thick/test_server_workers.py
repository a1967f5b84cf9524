"""The daemon's socket server on its own: hand-parsed HTTP, workers that grow with overlap and shrink back."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cni_shim.thick import forward, server
from cni_shim.thick.dispatch import MAX_BODY, Answer
from cni_shim.thick.server import SPARE_WORKERS, Server, State, listen


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Callable[[Callable[[bytes], Answer]], tuple[Server, str]]]:
    started: list[tuple[Server, threading.Thread]] = []

    def start(serve: Callable[[bytes], Answer]) -> tuple[Server, str]:
        state = State()
        state.ready.set()
        srv = listen(str(tmp_path / "sock"), serve, state, None)
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        started.append((srv, thread))
        return srv, str(tmp_path / "sock" / forward.SOCKET_NAME)

    yield start
    for srv, thread in started:
        srv.shutdown()
        thread.join(5)
        srv.server_close()
        assert not thread.is_alive()


def _raw(path: str, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)  # all this client will send
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _recording(served: list[bytes]) -> Callable[[bytes], Answer]:
    def serve(body: bytes) -> Answer:
        served.append(body)
        return Answer(200, b"", "ok")

    return serve


def _workers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "cni-request")


def test_overlapping_requests_each_get_a_worker_and_the_extra_ones_end_afterwards(serving):
    before = _workers()
    arrived = threading.Barrier(4, timeout=5)

    def serve(body: bytes) -> Answer:
        arrived.wait()  # returns only once four requests run at the same time
        return Answer(200, body, "ok")

    _, path = serving(serve)
    answers: list[tuple[int, bytes]] = []
    clients = [
        threading.Thread(
            target=lambda i=i: answers.append(forward.exchange(path, "POST", "/cni", f"r{i}".encode(), 5))
        )
        for i in range(4)
    ]
    for c in clients:
        c.start()
    for c in clients:
        c.join(10)
    assert sorted(answers) == [(200, f"r{i}".encode()) for i in range(4)]
    # The burst's workers end once idle; the spares stay for the next request.
    forward.exchange(path, "GET", "/healthz", b"", 5)
    deadline = threading.Event()
    for _ in range(100):
        if _workers() - before <= SPARE_WORKERS + 1:
            break
        deadline.wait(0.05)
    assert _workers() - before <= SPARE_WORKERS + 1


def test_sequential_requests_start_no_thread(serving, monkeypatch):
    _, path = serving(lambda body: Answer(200, b"{}", "ok"))
    forward.exchange(path, "GET", "/healthz", b"", 5)  # the spares are up
    starts: list[object] = []
    real = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        starts.append(thread)
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    for _ in range(20):
        assert forward.exchange(path, "POST", "/cni", b"{}", 5) == (200, b"{}")
    assert starts == []


def test_a_body_split_across_writes_and_a_100_continue_are_read_whole(serving):
    _, path = serving(lambda body: Answer(200, body, "ok"))
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(b"POST /cni HTTP/1.1\r\nexpect: 100-continue\r\nCONTENT-LENGTH: 10\r\n\r\n")
        assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(b"01234")
        s.sendall(b"56789")
        answer = s.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.0 200 OK\r\n")
    assert answer.endswith(b"\r\nContent-Length: 10\r\n\r\n0123456789")


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /cni HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1), 413),
        (b"POST /cni HTTP/1.0\r\nContent-Length: -1\r\n\r\n", 413),
        (b"POST /cni HTTP/1.0\r\nContent-Length: x\r\n\r\n", 413),
        (b"POST /cni\r\n\r\n", 400),
        (b"POST /cni HTTP/1.0\r\nno colon here\r\n\r\n", 400),
        (b"PUT /cni HTTP/1.0\r\n\r\n", 501),
        (b"GET /readyz?verbose HTTP/1.0\r\n\r\n", 200),
    ],
)
def test_requests_the_server_refuses_or_reads_leniently(serving, request_bytes, status):
    served: list[bytes] = []
    _, path = serving(_recording(served))
    assert _raw(path, request_bytes).split(b" ", 2)[1] == str(status).encode()
    assert served == []


def test_oversized_headers_are_refused(serving, monkeypatch):
    monkeypatch.setattr(server, "MAX_HEAD", 100)
    _, path = serving(lambda body: Answer(200, b"", "ok"))
    assert _raw(path, b"GET /healthz HTTP/1.0\r\nX: " + b"a" * 200).split(b" ", 2)[1] == b"431"


def test_a_peer_that_leaves_mid_request_runs_nothing(serving):
    served: list[bytes] = []
    _, path = serving(_recording(served))
    assert _raw(path, b"POST /cni HTTP/1.0\r\nContent-Length: 10\r\n\r\n0123") == b""
    assert _raw(path, b"POST /cni HTT") == b""
    assert forward.exchange(path, "POST", "/cni", b"x", 5) == (200, b"")
    assert served == [b"x"]


def test_shutdown_refuses_new_connections_and_ends_serve_forever(serving):
    srv, path = serving(lambda body: Answer(200, b"", "ok"))
    assert forward.exchange(path, "GET", "/healthz", b"", 5)[0] == 200
    srv.shutdown()
    with pytest.raises(OSError):
        forward.exchange(path, "GET", "/healthz", b"", 1)


def test_a_request_that_raises_is_a_500_and_the_server_goes_on(serving):
    def serve(body: bytes) -> Answer:
        if body == b"boom":
            raise RuntimeError("a bug")
        return Answer(200, body, "ok")

    _, path = serving(serve)
    for _ in range(SPARE_WORKERS + 1):  # more than the spares: every worker that raised still serves
        assert forward.exchange(path, "POST", "/cni", b"boom", 5) == (
            500,
            b"cni-shim-daemon failed: RuntimeError: a bug\n",
        )
    assert forward.exchange(path, "POST", "/cni", b"fine", 5) == (200, b"fine")
