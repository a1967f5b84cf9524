"""The real cni-shim-daemon as a process on a private socket dir, optionally against the test bed.

Fixtures: ``cni_daemon`` (factory: ``cni_daemon(config, kube=True)`` starts one daemon and
returns a :class:`DaemonProc`; all are killed after the test), ``daemon_kubeconfig`` (session:
the daemon's own identity, user ``cni-shim-daemon``, with the deployment's Pod/NAD rights) and
``thick_bin`` (a CNI bin dir with the test plugins plus ``cni-shim``). Helpers: :func:`shim_conf`,
:func:`run_shim`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cni_shim.thick import forward
from tests.support.cni import CniRun, run_cni

REPO = Path(__file__).resolve().parents[2]
DAEMON = REPO / ".venv" / "bin" / "cni-shim-daemon"
SHIM = REPO / ".venv" / "bin" / "cni-shim"
# The thin shim's identity: live reads of one Pod and its NADs, and the Pod status write.
CNI_USER = "cni-shim"
CNI_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
    {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["network-attachment-definitions"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]
DAEMON_USER = "cni-shim-daemon"
DAEMON_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update"]},
    {
        "apiGroups": ["k8s.cni.cncf.io"],
        "resources": ["network-attachment-definitions"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class DaemonProc:
    def __init__(self, workdir: Path, config: Mapping[str, Any], env: Mapping[str, str]) -> None:
        self.workdir = workdir
        self.socket_dir = workdir / "sock"
        self.metrics_port = free_port()
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
                [str(DAEMON), "--config", str(self.config_path), "--enable-test-hooks"],
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


@pytest.fixture(scope="session")
def daemon_kubeconfig(testbed: Any) -> Path:
    path = testbed.issue_identity("cni-shim-daemon", DAEMON_USER)
    testbed.grant(DAEMON_USER, DAEMON_RULES)
    return Path(path)


@pytest.fixture
def cni_daemon(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., DaemonProc]]:
    started: list[DaemonProc] = []

    def start(config: Mapping[str, Any], *, kube: bool = True, node_name: str = "") -> DaemonProc:
        conf = dict(config)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        if kube:
            bed = request.getfixturevalue("testbed")
            conf.setdefault("kubeconfig", str(request.getfixturevalue("daemon_kubeconfig")))
            env["NODE_NAME"] = node_name or bed.node_name
        workdir = tmp_path / f"daemon{len(started)}"
        workdir.mkdir()
        daemon = DaemonProc(workdir, conf, env)
        started.append(daemon)
        return daemon.start()

    yield start
    # Each daemon is reaped even when reaping another one failed.
    with contextlib.ExitStack() as reap:
        for daemon in started:
            reap.callback(daemon.cleanup)


def shim_bin_dir(out: Path, plugins: Path, *shim_names: str, recorder_as_sriov: bool = True) -> Path:
    """The test plugins plus `cni-shim` under each of `shim_names`; with `recorder_as_sriov` the
    recorder stands in for `sriov` (for suites with no VF)."""
    out.mkdir()
    for entry in plugins.iterdir():
        if not (recorder_as_sriov and entry.name == "sriov"):
            (out / entry.name).symlink_to(entry)
    if recorder_as_sriov:
        (out / "sriov").symlink_to(plugins / "recorder")
    for name in shim_names:
        (out / name).symlink_to(SHIM)
    return out


@pytest.fixture
def thick_bin(tmp_path: Path, cni_bin_dir: Path) -> Path:
    return shim_bin_dir(tmp_path / "bin", cni_bin_dir, "cni-shim")


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


# The runtime's environment for one ADD, as unit tests of the thick shim's forwarding send it.
SHIM_ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "c1",
    "CNI_NETNS": "/run/netns/x",
    "CNI_IFNAME": "eth0",
    "CNI_ARGS": "",
    "CNI_PATH": "/opt/cni/bin",
}


def pod_args(namespace: str, name: str, uid: str = "") -> str:
    args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name};K8S_POD_INFRA_CONTAINER_ID=sb"
    return args + (f";K8S_POD_UID={uid}" if uid else "")


# A netns path that exists (ADD refuses one that does not, as Multus does); the recording
# delegates these helpers run never enter it.
SANDBOX = "/proc/self/ns/net"


def run_shim(
    bin_dir: Path, command: str, conf: Mapping[str, Any], cid: str, args: str, netns: str = SANDBOX
) -> CniRun:
    return run_cni(
        "cni-shim",
        command,
        conf,
        bin_dir=bin_dir,
        container_id=cid,
        netns=netns,
        ifname="eth0",
        cni_args=args,
    )
