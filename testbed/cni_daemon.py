"""cni-shim-daemon as a process of its own on a private socket dir (``DaemonProc``), the identities
the CNI side runs as, and the thick shim's host-side conf (:func:`shim_conf`).

For the thick-mode suites (their fixtures are tests/support/cni_daemon.py) and the bench; the
end-to-end stack runs its node's daemon through testbed/nodecni.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cni_shim.thick import forward
from testbed.processes import free_port

REPO = Path(__file__).resolve().parents[1]
DAEMON = REPO / ".venv" / "bin" / "cni-shim-daemon"
SHIM = REPO / ".venv" / "bin" / "cni-shim"
# The thin shim's identity: live reads of one Pod and its NADs (and, for a DEL that lost its cache,
# a list of the Pod's shadows), and the Pod status write.
CNI_USER = "cni-shim"
CNI_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
    {
        "apiGroups": ["k8s.cni.cncf.io"],
        "resources": ["network-attachment-definitions"],
        "verbs": ["get", "list"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]
DAEMON_USER = "cni-shim-daemon"
DAEMON_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    # Its Node's UID: the NAD cache selects this node's shadows by it (deploy/base/cni-rbac.yaml).
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
    {
        "apiGroups": ["k8s.cni.cncf.io"],
        "resources": ["network-attachment-definitions"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]


class DaemonProc:
    def __init__(
        self, workdir: Path, config: Mapping[str, Any], env: Mapping[str, str], executable: Path = DAEMON
    ) -> None:
        self.executable = executable
        self.workdir = workdir
        self.socket_dir = workdir / "sock"
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.config = {
            "socketDir": str(self.socket_dir),
            "metricsAddress": f"127.0.0.1:{self.metrics_port}",
            **config,
        }
        self.config_path = workdir / "daemon-config.json"
        self.config_path.write_text(json.dumps(self.config))
        self.log_path = workdir / "daemon.log"
        self._env = dict(env)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def socket_path(self) -> str:
        return str(self.socket_dir / forward.SOCKET_NAME)

    def start(self, timeout: float = 40.0) -> DaemonProc:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(self.executable),
                    "--config",
                    str(self.config_path),
                    "--health-address",
                    f"127.0.0.1:{self.health_port}",
                    "--enable-test-hooks",
                ],
                env=self._env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its delegates share its process group, so kill() takes them too
            )
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"cni-shim-daemon exited {self.proc.returncode}:\n{self.log_path.read_text()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"cni-shim-daemon not ready in {timeout}s:\n{self.log_path.read_text()}")
            time.sleep(0.05)
        return self

    def _ready(self) -> bool:
        try:
            return self.request("GET", "/readyz")[0] == 200
        except OSError:
            return False

    def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        return forward.exchange(self.socket_path, method, path, body, 10.0)

    def probe(self, path: str, timeout: float = 5.0) -> int:
        """What kubelet's httpGet probe of `path` (/healthz, /readyz) gets: the HTTP status."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}{path}", timeout=timeout
            ) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def informers(self) -> dict[str, dict[str, str]]:
        status, body = self.request("GET", "/debug/informers")
        assert status == 200, body
        data: dict[str, dict[str, str]] = json.loads(body)
        return data

    def freeze_informers(self) -> None:
        assert self.request("POST", "/debug/informers/freeze")[0] == 200

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample, 0 when absent."""
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        for line in self.metrics().splitlines():
            series, _, value = line.rpartition(" ")
            if series.split("{")[0] == name and _labels(series) == want:
                return float(value)
        return 0.0

    def logs(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_text().splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                out.append(doc)
        return out

    def kill(self) -> None:
        """SIGKILL the daemon and every delegate it is running (no clean-up at all)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.proc.returncode)

    def cleanup(self) -> None:
        if self.proc is not None:
            # delegates may outlive a daemon that exited on its own
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def _labels(series: str) -> str:
    if "{" not in series:
        return ""
    inner = series[series.index("{") + 1 : series.rindex("}")]
    return ",".join(sorted(p for p in inner.split(",") if p))


def shim_conf(daemon: DaemonProc | Path, **extra: Any) -> dict[str, Any]:
    """The host-side 00-*.conf of thick mode: it names the socket dir; the daemon config does the rest."""
    socket_dir = daemon.socket_dir if isinstance(daemon, DaemonProc) else daemon
    return {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "cni-shim",
        "daemonSocketDir": str(socket_dir),
        **extra,
    }
