"""The daemon's one Kubernetes client: the official library's connection, spoken as raw JSON.

The core works on plain dicts, and informers must keep exactly what the API server sent, so
this adapter skips the library's model classes and maps every failure to KubeApiError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cni_shim.errors import KubeApiError
from cni_shim.kube.paths import REQUEST_TIMEOUT


def _message(data: bytes) -> str:
    try:
        return str(json.loads(data).get("message", ""))[:500]
    except (ValueError, AttributeError):
        return data[:200].decode(errors="replace")


def _object(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise KubeApiError(f"{what} returned a body that is not JSON", 0) from exc
    if not isinstance(doc, dict):
        raise KubeApiError(f"{what} returned a body that is not an object", 0)
    return doc


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


class ApiServer:
    """Thread-safe: the library pools connections per host."""

    def __init__(self, api: Any, timeout: float = REQUEST_TIMEOUT) -> None:
        self._api = api
        self._timeout = timeout

    @classmethod
    def connect(cls, kubeconfig: str) -> ApiServer:
        from kubernetes import client, config  # noqa: PLC0415 - daemon only

        configuration = client.Configuration()
        if kubeconfig:
            config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        configuration.retries = _retries()
        return cls(client.ApiClient(configuration))

    @property
    def server(self) -> str:
        return str(self._api.configuration.host)

    def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, str]] = (),
        body: Mapping[str, Any] | None = None,
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        headers = {"Accept": "application/json", "User-Agent": "cni-shim-daemon"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            request = self._api.param_serialize(
                method,
                path,
                query_params=list(query),
                header_params=headers,
                body=dict(body) if body is not None else None,
                auth_settings=["BearerToken"],
            )
            return self._api.call_api(*request, _request_timeout=timeout or self._timeout)
        except Exception as exc:  # urllib3's errors have no common base worth naming here
            raise KubeApiError(f"{method} {path} on {self.server} failed: {exc}", 0) from exc

    def _read(self, response: Any, what: str) -> bytes:
        try:
            return bytes(response.read())
        except Exception as exc:
            raise KubeApiError(f"{what}: reading the answer failed: {exc}", 0) from exc

    def get(self, path: str, what: str) -> dict[str, Any] | None:
        response = self._send("GET", path)
        data = self._read(response, f"GET {what}")
        if response.status == 404:
            return None
        if response.status != 200:
            raise KubeApiError(
                f"GET {what} returned HTTP {response.status}: {_message(data)}", response.status
            )
        return _object(data, f"GET {what}")

    def put(self, path: str, body: Mapping[str, Any], what: str) -> None:
        response = self._send("PUT", path, body=body)
        data = self._read(response, f"PUT {what}")
        if response.status != 200:
            raise KubeApiError(
                f"PUT {what} failed: HTTP {response.status}: {_message(data)}", response.status
            )

    def post(self, path: str, body: Mapping[str, Any], what: str) -> int:
        """POST an object; returns the HTTP status (201/200 created, 409 already there)."""
        response = self._send("POST", path, body=body)
        data = self._read(response, f"POST {what}")
        if response.status not in (200, 201, 409):
            raise KubeApiError(
                f"POST {what} failed: HTTP {response.status}: {_message(data)}", response.status
            )
        return int(response.status)

    def list(self, path: str, query: Sequence[tuple[str, str]]) -> dict[str, Any]:
        response = self._send("GET", path, query, timeout=60.0)
        data = self._read(response, f"LIST {path}")
        if response.status != 200:
            raise KubeApiError(
                f"LIST {path} returned HTTP {response.status}: {_message(data)}", response.status
            )
        return _object(data, f"LIST {path}")

    def watch(
        self, path: str, query: Sequence[tuple[str, str]], idle_timeout: float
    ) -> Iterator[dict[str, Any]]:
        """Watch events as the server sends them; ends when the server closes the stream."""
        from kubernetes.watch.watch import iter_resp_lines  # noqa: PLC0415

        response = self._send("GET", path, [*query, ("watch", "true")], timeout=(5.0, idle_timeout))
        try:
            if response.status != 200:
                data = self._read(response, f"WATCH {path}")
                raise KubeApiError(
                    f"WATCH {path} returned HTTP {response.status}: {_message(data)}", response.status
                )
            try:
                # The library's answer wraps urllib3's, and only the inner one can stream.
                for line in iter_resp_lines(response.response):  # type: ignore[no-untyped-call]
                    if line.strip():
                        yield _object(line.encode() if isinstance(line, str) else line, f"WATCH {path}")
            except KubeApiError:
                raise
            except Exception as exc:
                raise KubeApiError(f"WATCH {path} broke off: {exc}", 0) from exc
        finally:
            response.response.close()
            response.response.release_conn()
