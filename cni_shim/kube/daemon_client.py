"""The daemon's one Kubernetes client, spoken as raw JSON.

The core works on plain dicts, and informers must keep exactly what the API server sent, so
this adapter needs no model classes; every failure maps to ApiError.

A request's own calls (the Pod and NAD GETs, the status PUT, the Event POST) go over kept-alive
sockets of the thin shim's HTTP/1.1 client, one per concurrent caller: urllib3 spent about
0.3 ms more CPU per call on a Pod GET (0.44 against 0.15 ms, measured against the test bed's API
server), twice on every ADD's critical path. Lists and watches stay on urllib3's pool: they are
few, long or streamed. Users whose credentials need the official library's exec or
auth-provider plugins use its pool for everything.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import urllib3

from cni_shim.errors import ApiError
from cni_shim.kube.kubeconfig import Connection
from cni_shim.kube.paths import REQUEST_TIMEOUT
from cni_shim.kube.thin_client import KubeClient, ssl_context

_USER_AGENT = "cni-shim-daemon"


def _message(data: bytes) -> str:
    try:
        return str(json.loads(data).get("message", ""))[:500]
    except (ValueError, AttributeError):
        return data[:200].decode(errors="replace")


def _object(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ApiError(f"{what} returned a body that is not JSON", 0) from exc
    if not isinstance(doc, dict):
        raise ApiError(f"{what} returned a body that is not an object", 0)
    return doc


# Connections kept per API server: the NAD readers, the informers' lists and watches, the Event
# writer and the request threads each hold one while they use it.
NAD_POOL = 8


def _bearer(token: str, token_file: str) -> str:
    """The Authorization header; a token file is read per request, so a rotated token is used at once."""
    if not token and token_file:
        try:
            with open(token_file, encoding="ascii") as fh:
                token = fh.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ApiError(f"cannot read the bearer token file {token_file}: {exc}", 401) from exc
    return f"Bearer {token}" if token else ""


def _retries() -> Any:
    """urllib3's default resends (a connection dropped before the answer), except after a read
    timeout: by default a held request is sent four times, so one call took 4 x REQUEST_TIMEOUT.
    A resent status PUT is safe: its resourceVersion precondition turns a lost-but-applied write
    into a 409, which the core retries by reading the Pod again."""
    from types import TracebackType  # noqa: PLC0415

    from urllib3.connectionpool import ConnectionPool  # noqa: PLC0415 - daemon only
    from urllib3.exceptions import ReadTimeoutError  # noqa: PLC0415
    from urllib3.response import BaseHTTPResponse  # noqa: PLC0415
    from urllib3.util.retry import Retry  # noqa: PLC0415

    class Retries(Retry):
        def increment(
            self,
            method: str | None = None,
            url: str | None = None,
            response: BaseHTTPResponse | None = None,
            error: Exception | None = None,
            _pool: ConnectionPool | None = None,
            _stacktrace: TracebackType | None = None,
        ) -> Retries:
            if isinstance(error, ReadTimeoutError):
                raise error
            return super().increment(method, url, response, error, _pool, _stacktrace)

    return Retries(Retry.DEFAULT.total)


class Sockets:
    """Kept-alive sockets to one API server, each used by one thread at a time.

    Each is the thin shim's KubeClient: it resends a request once when a reused socket turns out
    closed, never after a timeout, and words a transport failure as urllib3's path did here
    (`<method> <path> on <server> failed: ...`, status 0). At most NAD_POOL idle ones are kept.
    """

    def __init__(self, conn: Connection, timeout: float = REQUEST_TIMEOUT) -> None:
        # One client holds the TLS settings (loaded once, on its first connection); every socket
        # is a sibling of it, so a new socket never loads the certificates again.
        self._first = KubeClient(conn, timeout, _USER_AGENT)
        self._lock = threading.Lock()
        self._idle: list[KubeClient] = [self._first]

    def request(self, method: str, path: str, body: Mapping[str, Any] | None) -> tuple[int, bytes]:
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            client = self._first.sibling()
        try:
            return client.request(method, path, body)
        finally:
            # A failed client has closed its socket and opens a fresh one when next used.
            with self._lock:
                keep = len(self._idle) < NAD_POOL
                if keep:
                    self._idle.append(client)
            if not keep:
                client.close()


class ApiServer:
    """Thread-safe: the sockets and urllib3's pool keep connections alive per caller."""

    def __init__(
        self,
        pool: Any,
        host: str,
        authorization: Callable[[], str] = str,
        timeout: float = REQUEST_TIMEOUT,
        sockets: Sockets | None = None,
    ) -> None:
        self._pool = pool
        self._host = host.rstrip("/")
        self._authorization = authorization
        self._timeout = timeout
        self._sockets = sockets

    @classmethod
    def connect(cls, kubeconfig: str) -> ApiServer:
        """The kubeconfig's (or the in-cluster) API server. urllib3 and the shim's own kubeconfig
        reader suffice for tokens and client certificates; the official library, whose import alone
        holds some 20 MiB of the daemon's memory, is loaded only for an exec or auth-provider user."""
        from cni_shim.kube import kubeconfig as kubeconfigs  # noqa: PLC0415 - daemon only

        conn = kubeconfigs.load(kubeconfig) if kubeconfig else kubeconfigs.in_cluster(os.environ)
        if conn is None:
            raise ApiError("no kubeconfig given and not in a cluster (KUBERNETES_SERVICE_HOST unset)", 0)
        if conn.auth_plugin:
            return cls._through_library(kubeconfig)
        extra: dict[str, Any] = {}
        if conn.server.startswith("https://"):
            extra["ssl_context"] = ssl_context(conn)
            if conn.insecure:
                extra.update(cert_reqs="CERT_NONE", assert_hostname=False)
            elif conn.tls_server_name:
                extra["server_hostname"] = conn.tls_server_name
        pool = urllib3.PoolManager(num_pools=2, maxsize=NAD_POOL, retries=_retries(), **extra)
        return cls(pool, conn.server, lambda: _bearer(conn.token, conn.token_file), sockets=Sockets(conn))

    @classmethod
    def _through_library(cls, kubeconfig: str) -> ApiServer:
        from kubernetes import client, config  # noqa: PLC0415 - exec / auth-provider users only

        configuration = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
        configuration.retries = _retries()
        api = client.ApiClient(configuration)
        # get_api_key_with_prefix runs the library's refresh hook (the exec plugin) when due.
        return cls(
            api.rest_client.pool_manager,
            str(configuration.host),
            lambda: str(configuration.get_api_key_with_prefix("authorization") or ""),
        )

    @property
    def server(self) -> str:
        return self._host

    def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        timeout: float | tuple[float, float] | None = None,
        *,
        stream: bool = False,
        gzip: bool = False,
    ) -> Any:
        headers = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if gzip:
            headers["Accept-Encoding"] = "gzip"
        if body is not None:
            headers["Content-Type"] = "application/json"
        url = f"{self._host}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(list(query))
        limit = timeout or self._timeout
        try:
            authorization = self._authorization()
            if authorization:
                headers["Authorization"] = authorization
            return self._pool.request(
                method,
                url,
                body=json.dumps(body).encode() if body is not None else None,
                headers=headers,
                timeout=urllib3.Timeout(connect=limit[0], read=limit[1])
                if isinstance(limit, tuple)
                else urllib3.Timeout(limit),
                preload_content=not stream,
            )
        except Exception as exc:  # urllib3's errors have no common base worth naming here
            raise ApiError(f"{method} {path} on {self.server} failed: {exc}", 0) from exc

    def _read(self, response: Any, what: str) -> bytes:
        try:
            return bytes(response.data)
        except Exception as exc:
            raise ApiError(f"{what}: reading the answer failed: {exc}", 0) from exc

    def _call(
        self, method: str, path: str, what: str, body: Mapping[str, Any] | None = None
    ) -> tuple[int, bytes]:
        """One request/answer exchange: (HTTP status, body)."""
        if self._sockets is not None:
            return self._sockets.request(method, path, body)
        response = self._send(method, path, body=body)
        return int(response.status), self._read(response, f"{method} {what}")

    def get(self, path: str, what: str) -> dict[str, Any] | None:
        status, data = self._call("GET", path, what)
        if status == 404:
            return None
        if status != 200:
            raise ApiError(f"GET {what} returned HTTP {status}: {_message(data)}", status)
        return _object(data, f"GET {what}")

    def put(self, path: str, body: Mapping[str, Any], what: str) -> None:
        status, data = self._call("PUT", path, what, body)
        if status != 200:
            raise ApiError(f"PUT {what} failed: HTTP {status}: {_message(data)}", status)

    def post(self, path: str, body: Mapping[str, Any], what: str) -> int:
        """POST an object; returns the HTTP status (201/200 created, 409 already there)."""
        status, data = self._call("POST", path, what, body)
        if status not in (200, 201, 409):
            raise ApiError(f"POST {what} failed: HTTP {status}: {_message(data)}", status)
        return status

    def list(self, path: str, query: Sequence[tuple[str, str]]) -> dict[str, Any]:
        # Lists ask for gzip, as Multus does (kube-apiserver compresses answers over 128 KiB;
        # urllib3 decodes them). Watches are never compressed by the server.
        response = self._send("GET", path, query, timeout=60.0, gzip=True)
        data = self._read(response, f"LIST {path}")
        if response.status != 200:
            raise ApiError(f"LIST {path} returned HTTP {response.status}: {_message(data)}", response.status)
        return _object(data, f"LIST {path}")

    def watch(
        self, path: str, query: Sequence[tuple[str, str]], idle_timeout: float
    ) -> Iterator[dict[str, Any]]:
        """Watch events as the server sends them; ends when the server closes the stream."""
        response = self._send(
            "GET", path, [*query, ("watch", "true")], timeout=(5.0, idle_timeout), stream=True
        )
        try:
            if response.status != 200:
                data = self._read(response, f"WATCH {path}")
                raise ApiError(
                    f"WATCH {path} returned HTTP {response.status}: {_message(data)}", response.status
                )
            try:
                pending = b""
                for chunk in response.stream(65536):
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield _object(line, f"WATCH {path}")
                if pending.strip():
                    yield _object(pending, f"WATCH {path}")
            except ApiError:
                raise
            except Exception as exc:
                raise ApiError(f"WATCH {path} broke off: {exc}", 0) from exc
        finally:
            response.close()
            response.release_conn()
