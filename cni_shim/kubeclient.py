"""A minimal standard-library Kubernetes client: the three calls the CNI shim makes.

Every request has a short timeout so a slow API server fails the CNI call visibly inside the
runtime's budget instead of hanging it.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import tempfile
import urllib.parse
from collections.abc import Mapping
from typing import Any

from cni_shim.errors import KubeApiError
from cni_shim.kubeconfig import Connection

REQUEST_TIMEOUT = 5.0
NAD_PATH = "/apis/k8s.cni.cncf.io/v1/namespaces/{ns}/network-attachment-definitions/{name}"


def _ssl_context(conn: Connection) -> ssl.SSLContext:
    ctx = ssl.create_default_context(
        cafile=conn.ca_file or None, cadata=conn.ca_data.decode() if conn.ca_data else None
    )
    if conn.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if conn.cert_file or conn.cert_data:
        if conn.cert_data or conn.key_data:
            # ssl only loads key material from files; keep them in a private directory briefly.
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
        else:
            ctx.load_cert_chain(conn.cert_file, conn.key_file or None)
    return ctx


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


class KubeClient:
    def __init__(self, conn: Connection, timeout: float = REQUEST_TIMEOUT) -> None:
        url = urllib.parse.urlsplit(conn.server)
        self._https = url.scheme == "https"
        self._host = url.hostname or ""
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        self._conn = conn
        self._timeout = timeout
        self._ctx: ssl.SSLContext | None = None
        self._http: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._http is None:
            if self._https:
                if self._ctx is None:
                    self._ctx = _ssl_context(self._conn)
                self._http = http.client.HTTPSConnection(
                    self._host, self._port, timeout=self._timeout, context=self._ctx
                )
            else:
                self._http = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        return self._http

    def _token(self) -> str:
        if self._conn.token:
            return self._conn.token
        if self._conn.token_file:
            return _read(self._conn.token_file).decode().strip()
        return ""

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, bytes]:
        headers = {"Accept": "application/json", "User-Agent": "cni-shim"}
        token = self._token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn = self._connection()
            conn.request(method, self._prefix + path, body=payload, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            self.close()
            raise KubeApiError(f"{method} {path} on {self._conn.server} failed: {exc}", 0) from exc

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _get(self, path: str, what: str) -> dict[str, Any] | None:
        status, data = self.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise KubeApiError(f"GET {what} returned HTTP {status}: {_reason(data)}", status)
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise KubeApiError(f"GET {what} returned a body that is not JSON", 0) from exc
        if not isinstance(doc, dict):
            raise KubeApiError(f"GET {what} returned a body that is not an object", 0)
        return doc

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(name)}"
        return self._get(path, f"pod {namespace}/{name}")

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = NAD_PATH.format(ns=_q(namespace), name=_q(name))
        return self._get(path, f"network-attachment-definition {namespace}/{name}")

    def replace_pod_status(self, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{_q(meta['namespace'])}/pods/{_q(meta['name'])}/status"
        status, data = self.request("PUT", path, pod)
        if status != 200:
            raise KubeApiError(
                f"status update failed for pod {meta['namespace']}/{meta['name']}: HTTP {status}: {_reason(data)}",
                status,
            )


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _reason(data: bytes) -> str:
    try:
        return str(json.loads(data).get("message", ""))[:500]
    except (ValueError, AttributeError):
        return data[:200].decode(errors="replace")
