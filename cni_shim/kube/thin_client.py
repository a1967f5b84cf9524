"""A minimal standard-library Kubernetes client: the three calls the CNI shim makes.

It speaks HTTP/1.1 over one kept-alive (TLS) socket itself: `http.client` pulls in the
`email` package, which alone costs more start-up time than the rest of an ADD's imports.
For the same reason it drives the C layers `_socket` and `_ssl` directly: the `socket` and
`ssl` modules wrap exactly these objects, but their own import (enum conversions of every
constant, `base64` and `re`, `selectors`) costs about 8 ms of each thin ADD, which uses none of
it. Host names are verified by OpenSSL either way (check_hostname on the context).
Every request has a short timeout so a slow API server fails the CNI call visibly inside the
runtime's budget instead of hanging it.
"""

from __future__ import annotations

import _socket
import _ssl
import io
import os

from cni_shim.errors import ApiError
from cni_shim.kube.kubeconfig import Connection, split_server
from cni_shim.kube.paths import (
    REQUEST_TIMEOUT,
    events_path,
    list_items,
    nad_path,
    nads_path,
    pod_path,
    pod_status_path,
)
from sriov_lib import quickjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Mapping
    from typing import Any, BinaryIO, TypeVar

    _Context = TypeVar("_Context", bound=_ssl._SSLContext)

# A Pod or NAD is far below this; a bigger answer is refused rather than buffered.
MAX_BODY = 32 * 1024 * 1024
_MAX_LINE = 65536


class _ProtocolError(Exception):
    pass


def configure_tls(ctx: _Context, conn: Connection) -> _Context:
    """Give a client context (PROTOCOL_TLS_CLIENT: hostname check and CERT_REQUIRED on) a
    connection's TLS settings: its CA (else the system's), client certificate, insecure."""
    if conn.ca_file or conn.ca_data:
        ctx.load_verify_locations(conn.ca_file or None, None, conn.ca_data.decode() if conn.ca_data else None)
    else:
        ctx.set_default_verify_paths()
    if conn.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = _ssl.CERT_NONE
    if conn.cert_data or conn.key_data:
        import tempfile  # noqa: PLC0415 - only inline key material needs it

        # OpenSSL loads key material only from files; keep them in a private directory briefly.
        with tempfile.TemporaryDirectory(prefix="cni-shim-") as tmp:
            cert = os.path.join(tmp, "cert.pem")
            key = os.path.join(tmp, "key.pem")
            for target, data, src in (
                (cert, conn.cert_data, conn.cert_file),
                (key, conn.key_data, conn.key_file),
            ):
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data or _read(src))
            ctx.load_cert_chain(cert, key)
    elif conn.cert_file:
        ctx.load_cert_chain(conn.cert_file, conn.key_file or None)
    return ctx


def ssl_context(conn: Connection) -> ssl.SSLContext:
    """The connection's TLS settings as an `ssl` context, for clients built on that module (urllib3)."""
    import ssl  # noqa: PLC0415 - the daemon's HTTP pool only; this client needs the C layer alone

    return configure_tls(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), conn)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _ascii(name: str) -> str:
    # The `idna` codec (with unicodedata) costs more than a lookup; an ASCII name is its own encoding.
    return name if name.isascii() else name.encode("idna").decode("ascii")


class _Socket(_socket.socket):
    """A socket a TLS object can refer to: it holds its socket by a weak reference."""

    __slots__ = ("__weakref__",)


def _tcp(host: str, port: int, timeout: float) -> _socket.socket:
    """A connected TCP socket to the first address of `host` that answers, as socket.create_connection."""
    error: OSError | None = None
    for family, kind, proto, _name, address in _socket.getaddrinfo(
        host.encode("ascii"), port, 0, _socket.SOCK_STREAM
    ):
        sock = _Socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            # One request is one write, so Nagle only delays it (Go's clients set this too).
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        return sock
    raise error or OSError(f"getaddrinfo returned no address for {host}")


class _Reads(io.RawIOBase):
    """The bytes a socket, or the TLS connection over it, receives: for io.BufferedReader."""

    def __init__(self, sock: _socket.socket, tls: Any) -> None:
        self._sock = sock
        self._tls = tls

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._tls is None:
            return self._sock.recv_into(buffer)
        return int(self._tls.read(len(buffer), buffer))


def _line(stream: BinaryIO) -> bytes:
    line = stream.readline(_MAX_LINE + 1)
    if not line:
        raise _ProtocolError("connection closed by the server")
    if len(line) > _MAX_LINE:
        raise _ProtocolError("header line too long")
    return line


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    if size > MAX_BODY:
        raise _ProtocolError(f"response body of {size} bytes is larger than {MAX_BODY}")
    data = stream.read(size)
    if len(data) != size:
        raise _ProtocolError("response body truncated")
    return data


def read_response(stream: BinaryIO) -> tuple[int, dict[str, str], bytes]:
    """Parse one HTTP/1.1 response: status line, headers, then a sized or chunked body."""
    parts = _line(stream).split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise _ProtocolError("not an HTTP/1.x response")
    status = int(parts[1])
    headers: dict[str, str] = {}
    while (line := _line(stream)) not in (b"\r\n", b"\n"):
        key, _, value = line.decode("latin-1").partition(":")
        headers[key.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        total = 0
        while (size := int(_line(stream).split(b";")[0].strip() or b"0", 16)) > 0:
            total += size
            chunks.append(_read_exact(stream, size if total <= MAX_BODY else MAX_BODY + 1))
            _line(stream)
        while _line(stream) not in (b"\r\n", b"\n"):
            pass  # trailers
        return status, headers, b"".join(chunks)
    if "content-length" in headers:
        return status, headers, _read_exact(stream, int(headers["content-length"]))
    headers["connection"] = "close"
    body = stream.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise _ProtocolError("response body too large")
    return status, headers, body


class KubeClient:
    pod_reads_live = True

    def __init__(
        self, conn: Connection, timeout: float = REQUEST_TIMEOUT, user_agent: str = "cni-shim"
    ) -> None:
        self._https, self._host, self._port, self._prefix = split_server(conn.server)
        self._conn = conn
        self._timeout = timeout
        self._agent = user_agent
        self._ctx: _ssl._SSLContext | None = None
        self._sock: _socket.socket | None = None
        self._send: Callable[[memoryview], int] | None = None
        self._stream: BinaryIO | None = None

    def sibling(self) -> KubeClient:
        """A client of the same server on a connection of its own, sharing the TLS settings (so
        its handshake does not load the certificates again)."""
        if self._https and self._ctx is None:
            self._ctx = self._tls()
        other = KubeClient(self._conn, self._timeout, self._agent)
        other._ctx = self._ctx
        return other

    def _tls(self) -> _ssl._SSLContext:
        return configure_tls(_ssl._SSLContext(_ssl.PROTOCOL_TLS_CLIENT), self._conn)

    def _connect(self) -> BinaryIO:
        if self._stream is None:
            sock = _tcp(_ascii(self._host), self._port, self._timeout)
            tls = None
            if self._https:
                if self._ctx is None:
                    self._ctx = self._tls()
                # What SSLContext.wrap_socket does underneath; the TLS object holds the socket
                # only weakly, and self._sock keeps it.
                tls = self._ctx._wrap_socket(  # type: ignore[attr-defined]  # the stub omits it
                    sock, False, _ascii(self._conn.tls_server_name or self._host)
                )
                tls.do_handshake()
            self._sock = sock
            self._send = sock.send if tls is None else tls.write
            self._stream = io.BufferedReader(_Reads(sock, tls))
        return self._stream

    def _sendall(self, data: bytes) -> None:
        assert self._send is not None
        view = memoryview(data)
        while view:
            view = view[self._send(view) :]

    def _token(self) -> str:
        token = self._conn.token
        if not token and self._conn.token_file:
            try:
                token = _read(self._conn.token_file).decode("ascii").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise ApiError(
                    f"cannot read the bearer token file {self._conn.token_file}: {exc}", 401
                ) from exc
        if any(c in token for c in "\r\n") or not token.isascii():
            raise ApiError("the bearer token must be one line of ASCII; fix the kubeconfig", 401)
        return token

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, bytes]:
        payload = quickjson.dumps(body).encode() if body is not None else b""
        token = self._token()
        head = [
            f"{method} {self._prefix}{path} HTTP/1.1",
            f"Host: {f'[{self._host}]' if ':' in self._host else self._host}:{self._port}",
            "Accept: application/json",
            f"User-Agent: {self._agent}",
            f"Content-Length: {len(payload)}",
        ]
        if body is not None:
            head.append("Content-Type: application/json")
        if token:
            head.append(f"Authorization: Bearer {token}")
        message = ("\r\n".join(head) + "\r\n\r\n").encode() + payload
        for attempt in (1, 2):
            reused = self._stream is not None
            try:
                stream = self._connect()
                self._sendall(message)
                status, headers, data = read_response(stream)
            except (OSError, _ProtocolError, ValueError) as exc:
                self.close()
                # A kept-alive socket the server already closed is retried once on a fresh one.
                if reused and attempt == 1 and not isinstance(exc, TimeoutError):
                    continue
                raise ApiError(f"{method} {path} on {self._conn.server} failed: {exc}", 0) from exc
            if headers.get("connection", "").lower() == "close":
                self.close()
            return status, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._send = None

    def _get(self, path: str, what: str) -> dict[str, Any] | None:
        status, data = self.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise ApiError(f"GET {what} returned HTTP {status}: {_reason(data)}", status)
        try:
            doc = quickjson.loads(data)
        except (ValueError, RecursionError) as exc:
            raise ApiError(f"GET {what} returned a body that is not JSON", 0) from exc
        if not isinstance(doc, dict):
            raise ApiError(f"GET {what} returned a body that is not an object", 0)
        return doc

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(pod_path(namespace, name), f"pod {namespace}/{name}")

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get(nad_path(namespace, name), f"network-attachment-definition {namespace}/{name}")

    def list_nads(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        what = f"network-attachment-definitions in {namespace} ({label_selector})"
        return list_items(self._get(nads_path(namespace, label_selector), what), what)

    def replace_pod_status(self, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        status, data = self.request("PUT", pod_status_path(meta["namespace"], meta["name"]), pod)
        if status != 200:
            raise ApiError(
                f"status update failed for pod {meta['namespace']}/{meta['name']}: HTTP {status}: {_reason(data)}",
                status,
            )

    def create_event(self, event: Mapping[str, Any], timeout: float) -> None:
        """POST one core/v1 Event, bounded by `timeout` instead of the usual request timeout."""
        namespace = event["metadata"]["namespace"]
        saved = self._timeout
        self._timeout = timeout
        if self._sock is not None:
            self._sock.settimeout(timeout)
        try:
            status, data = self.request("POST", events_path(namespace), event)
        finally:
            self._timeout = saved
            if self._sock is not None:
                self._sock.settimeout(saved)
        if status not in (200, 201, 409):  # 409: a same-named Event exists, which is this one
            raise ApiError(f"creating an Event in {namespace} failed: HTTP {status}: {_reason(data)}", status)


def _reason(data: bytes) -> str:
    try:
        return str(quickjson.loads(data).get("message", ""))[:500]
    except (ValueError, AttributeError):
        return data[:200].decode(errors="replace")
