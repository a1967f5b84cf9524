"""A fault-injecting TLS reverse proxy in front of the bed's real kube-apiserver.

Fault tests need the API to fail in exactly the ways a real cluster does (Forbidden, Conflict, a
timeout, a Create that succeeded but whose response never arrived) at exactly one request, while
every other request reaches the real apiserver. A mocked client cannot show what the official
client or a stdlib reader really does with a dropped connection, so the faults happen on the wire.

One proxy serves one identity: it connects upstream with that identity's client certificate, so
the apiserver authenticates, authorizes and audits the caller as that identity. Callers use the
generated ``kubeconfig`` (same CA as the bed, server pointing at the proxy).

Rules (testbed/faults.py) are matched in the order added; every rule whose filter matches a
request counts it, and the first one that wants to fire on that count injects its fault. Everything is thread-safe, so a test
can add and remove rules while its client is running, and ``requests`` records what was seen.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from testbed import kubeconfig
from testbed.faults import (
    ApiTarget,
    Fault,
    RecordedRequest,
    Rule,
    parse_target,
    verb_of,
)

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def _client_cert_of(kubeconfig_path: Path) -> tuple[str, Path, Path, Path]:
    """Server URL, CA, client cert and key from one of the bed's (JSON, file-path) kubeconfigs."""
    cfg = json.loads(kubeconfig_path.read_text())
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    return (
        cluster["server"],
        Path(cluster["certificate-authority"]),
        Path(user["client-certificate"]),
        Path(user["client-key"]),
    )


class FaultProxy:
    """One running proxy for one identity; ``close()`` (or ``with``) stops it and frees held requests."""

    def __init__(
        self,
        identity_kubeconfig: Path,
        serving_cert: Path,
        serving_key: Path,
        kubeconfig_out: Path,
        *,
        identity: str = "proxied",
    ) -> None:
        upstream, ca_file, cert, key = _client_cert_of(identity_kubeconfig)
        split = urlsplit(upstream)
        self.upstream_host = split.hostname or "127.0.0.1"
        self.upstream_port = split.port or 443
        self.upstream_tls = ssl.create_default_context(cafile=str(ca_file))
        self.upstream_tls.load_cert_chain(str(cert), str(key))
        self.identity = identity
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        # Upstream connections relaying a stream now, and those end_streams() is ending.
        self._streams: set[http.client.HTTPSConnection] = set()
        self._ended: set[http.client.HTTPSConnection] = set()

        serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        serving.load_cert_chain(str(serving_cert), str(serving_key))
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        # The handshake runs in each handler thread (setup), so a stalled client never blocks accept().
        self._server.socket = serving.wrap_socket(
            self._server.socket, server_side=True, do_handshake_on_connect=False
        )
        self.port: int = self._server.server_address[1]
        self.server = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = kubeconfig.write(
            kubeconfig_out, kubeconfig.render(self.server, ca_file, identity, cert, key)
        )
        self.ca_file = ca_file
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"fault-proxy-{identity}", daemon=True
        )
        self._thread.start()

    # --- the in-process API tests use -------------------------------------------------------

    def add_rule(
        self,
        fault: Fault,
        *,
        method: str | None = None,
        path: str | None = None,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        nth: int | None = None,
        times: int | None = None,
        after: int = 0,
    ) -> Rule:
        """Add a rule; ``nth=3`` fires on the third matching request only (``times`` defaults to 1).

        ``path`` is a regex searched in the request path including its query string.
        """
        if nth is not None:
            after, times = nth - 1, times if times is not None else 1
        rule = Rule(
            fault,
            method=method.upper() if method else None,
            path=re.compile(path) if path is not None else None,
            verb=verb,
            resource=resource,
            namespace=namespace,
            name=name,
            subresource=subresource,
            after=after,
            times=times,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def remove_rule(self, rule: Rule) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r is not rule]

    def clear(self) -> None:
        """Forget every rule and every recorded request."""
        with self._lock:
            self._rules.clear()
            self._requests.clear()

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request seen so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, *, verb: str | None = None, resource: str | None = None) -> list[RecordedRequest]:
        return [
            r
            for r in self.requests
            if (verb is None or r.verb == verb)
            and (resource is None or (r.target is not None and r.target.resource == resource))
        ]

    def end_streams(self) -> int:
        """End every stream relayed now (watches) the way a server ends one cleanly, with the last
        chunk, as a load balancer or an API server going away politely does: a client then resumes
        from the last resourceVersion it saw. Returns how many were ended; later streams relay as
        before."""
        with self._lock:
            live = list(self._streams)
            self._ended.update(live)
        for upstream in live:
            with contextlib.suppress(OSError, AttributeError):
                upstream.sock.shutdown(socket.SHUT_RDWR)
        return len(live)

    def close(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        with self._lock:
            live = list(self._connections)
        for conn in live:
            # Unblocks handler threads still streaming a watch or holding a timed-out request.
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- used by the handler threads ----------------------------------------------------------

    def _choose(self, method: str, path: str) -> Fault | None:
        chosen: Fault | None = None
        with self._lock:
            for rule in self._rules:
                if rule.offer(method, path, taken=chosen is not None):
                    chosen = rule.fault
        return chosen

    def _record(self, entry: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(entry)

    def _track(self, conn: socket.socket, live: bool) -> None:
        with self._lock:
            if live:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _stream(self, upstream: http.client.HTTPSConnection, live: bool) -> None:
        with self._lock:
            if live:
                self._streams.add(upstream)
            else:
                self._streams.discard(upstream)
                self._ended.discard(upstream)

    def _was_ended(self, upstream: http.client.HTTPSConnection) -> bool:
        with self._lock:
            return upstream in self._ended

    def _upstream(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.upstream_host, self.upstream_port, context=self.upstream_tls)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Joining handler threads on close would wait for open watches; close() shuts their sockets.
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[_Handler], proxy: FaultProxy) -> None:
        self.proxy = proxy
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-stream (a stopped watch, a client timeout) are routine here.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        self.request.settimeout(30)
        self.request.do_handshake()
        self.request.settimeout(None)
        super().setup()
        self.server.proxy._track(self.connection, True)

    def finish(self) -> None:
        self.server.proxy._track(self.connection, False)
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self._proxy()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _proxy(self) -> None:
        proxy = self.server.proxy
        body = self._read_body()
        method, path = self.command, self.path
        fault = proxy._choose(method, path)
        verb, target = verb_of(method, path), parse_target(path)

        def record(status: int | None) -> None:
            proxy._record(
                RecordedRequest(method, path, verb, target, status, fault.describe() if fault else None, body)
            )

        if fault is None or fault.kind == "delay":
            if fault is not None:
                proxy._stopping.wait(fault.seconds)
            self._forward(method, path, body, record)
        elif fault.kind == "status":
            record(fault.status)
            self._send_status(fault, target)
        elif fault.kind == "timeout":
            record(None)
            self._hold(fault.seconds)
            self.close_connection = True
        elif fault.kind == "response-lost":
            self._forward(method, path, body, record, answer=False)
            self.close_connection = True
        else:
            record(None)
            self._reset()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(
        self, method: str, path: str, body: bytes, record: Callable[[int], None], *, answer: bool = True
    ) -> None:
        """Send the request upstream; ``record`` the apiserver's status before any body is relayed,
        so a long watch is visible in ``requests`` while it streams."""
        upstream = self.server.proxy._upstream()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        send_body = body if body or method in ("POST", "PUT", "PATCH") else None
        try:
            upstream.request(method, path, body=send_body, headers=headers)
            resp = upstream.getresponse()
            if not answer:
                resp.read()
                record(resp.status)
                return
            record(resp.status)
            self.server.proxy._stream(upstream, True)
            self._relay(resp, head_only=method == "HEAD", upstream=upstream)
        finally:
            self.server.proxy._stream(upstream, False)
            upstream.close()

    def _relay(
        self,
        resp: http.client.HTTPResponse,
        *,
        head_only: bool,
        upstream: http.client.HTTPSConnection | None = None,
    ) -> None:
        length = resp.getheader("Content-Length")
        self.send_response_only(resp.status, resp.reason)
        for key, value in resp.getheaders():
            if key.lower() not in _HOP_BY_HOP:
                self.send_header(key, value)
        if head_only:
            self.send_header("Content-Length", length or "0")
            self.end_headers()
            return
        if length is not None:
            self.send_header("Content-Length", length)
            self.end_headers()
            self.wfile.write(resp.read())
            return
        # A watch (or any unsized body): pass each piece on as it arrives, never buffer the stream.
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while piece := resp.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
        except (OSError, http.client.HTTPException):
            if upstream is None or not self.server.proxy._was_ended(upstream):
                raise  # the upstream broke off: so does the client's stream
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = resp.will_close

    def _send_status(self, fault: Fault, target: ApiTarget | None) -> None:
        details: dict[str, Any] = {}
        if target is not None:
            details = {"kind": target.resource, **({"name": target.name} if target.name else {})}
            if target.group:
                details["group"] = target.group
        if fault.retry_after is not None:
            details["retryAfterSeconds"] = fault.retry_after
        payload = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": fault.message,
                "reason": fault.reason,
                "details": details,
                "code": fault.status,
            }
        ).encode()
        self.send_response_only(fault.status, fault.reason)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        if fault.retry_after is not None:
            self.send_header("Retry-After", str(fault.retry_after))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _hold(self, seconds: float) -> None:
        """Wait without answering until the client hangs up, the proxy stops, or ``seconds`` pass."""
        deadline = time.monotonic() + seconds
        stopping = self.server.proxy._stopping
        while not stopping.is_set() and time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.2)
            if readable:
                try:
                    if not self.connection.recv(1):
                        return
                except (OSError, ssl.SSLError):
                    return

    def _reset(self) -> None:
        # SO_LINGER 0 turns close() into a RST instead of an orderly FIN.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True
