"""Kubelet's probes over TCP (``--health-address``): `/healthz` and `/readyz`, each answered by a
round trip through the daemon's own unix socket, so a probe sees what the host-side shim would.

A probe passes only when the socket file is where the shim dials it, a worker accepts the
connection and the daemon's `/healthz` (alive) or `/readyz` (caches filled, not draining) says so.
The socket server always keeps a worker in accept() beside the ones running CNI requests, so a
probe never waits behind CNI work; a stopped or wedged daemon answers nothing and the probe's
timeout fails it. Answers are 200 or 503 with one line saying why.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cni_shim.thick import forward

PATHS = ("/healthz", "/readyz")
# Below the DaemonSet probes' timeoutSeconds, so a slow round trip reads as a failure with a reason
# rather than as the kubelet's own timeout.
ROUND_TRIP_TIMEOUT = 5.0


def verdict(socket_path: str, path: str, timeout: float = ROUND_TRIP_TIMEOUT) -> tuple[int, str]:
    """(HTTP status, one line) for one probe of `path` through the daemon's socket."""
    try:
        status, _ = forward.exchange(socket_path, "GET", path, b"", timeout)
    except OSError as exc:
        return 503, f"{path} through {socket_path}: {exc.strerror or exc}"
    if status != 200:
        return 503, f"{path} through {socket_path} answered {status}"
    return 200, "ok"


class _Probe(BaseHTTPRequestHandler):
    server: _ProbeServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in PATHS:
            status, line = verdict(self.server.socket_path, path, self.server.probe_timeout)
        else:
            status, line = 404, f"{path}: only {', '.join(PATHS)}"
        body = f"{line}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Probes every few seconds would drown the daemon's log; failures show in the Pod's events."""


class _ProbeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], socket_path: str, timeout: float) -> None:
        if ":" in address[0]:  # an IPv6 node address, as $(POD_IP) gives on an IPv6 cluster
            self.address_family = socket.AF_INET6
        super().__init__(address, _Probe)
        self.socket_path = socket_path
        self.probe_timeout = timeout


class HealthServer:
    """The probe listener on host:port (":9092" means every address; port 0 picks a free one)."""

    def __init__(self, address: str, socket_path: str, timeout: float = ROUND_TRIP_TIMEOUT) -> None:
        host, _, port = address.rpartition(":")
        self._server = _ProbeServer((host.strip("[]") or "0.0.0.0", int(port)), socket_path, timeout)  # noqa: S104
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="health", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
