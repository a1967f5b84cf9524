"""Health endpoints of the control-plane processes, probed with the standard library only."""

from __future__ import annotations

import http.client
import ssl
from pathlib import Path


def https_context(ca_file: Path | None) -> ssl.SSLContext:
    """Verify against the bed CA; without one (components that self-sign) skip verification."""
    if ca_file is not None:
        return ssl.create_default_context(cafile=str(ca_file))
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def get(
    port: int, path: str, *, tls: bool, ca_file: Path | None = None, timeout: float = 5.0
) -> tuple[int, str]:
    conn: http.client.HTTPConnection
    if tls:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=https_context(ca_file))
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def healthy(port: int, path: str, *, tls: bool, ca_file: Path | None = None) -> bool:
    try:
        status, _ = get(port, path, tls=tls, ca_file=ca_file, timeout=3.0)
    except OSError:
        return False
    return status == 200
