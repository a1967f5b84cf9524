"""A real node for the bed: containerd + runc + the real kubelet, each in its own directories.

The kubelet takes over the bed's Node object (``--hostname-override``), runs Pods through
containerd's CRI with the bed's CNI configuration directory (our cni-shim's conf first), and runs
the DRA plugin registry at ``<root-dir>/plugins_registry``, where the driver registers over its
real sockets. Images are built locally (testbed/images.py) and imported; nothing is pulled.

What the host needed, and why, is commented next to each setting in :func:`kubelet_config` and
:func:`containerd_config`. Teardown (:meth:`RealNode.stop`) leaves nothing behind: it stops and
removes every sandbox through the CRI (CNI DEL included), stops the kubelet and containerd, kills
only shims that serve this containerd, unmounts what containerd mounted under its dirs, removes the
node's cgroups and restores the sysctls the kubelet changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError
from testbed import images, processes
from testbed.processes import ProcessRecord, free_port, launch, log_tail
from testbed.tools import ToolSet, ToolUnavailable
from testbed.waiting import WaitTimeout, wait_for

NODE_COMPONENTS = ("kubelet", "containerd", "runc", "pause", "crictl")
CRI_NAMESPACE = "k8s.io"  # containerd's namespace for everything the CRI plugin manages
# The kubelet's kernel tunables (pkg/kubelet/cm setupKernelTunables) plus the keyring limits it
# raises; all are host-wide, so the first value seen is put back at teardown.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
CGROUP_V1_ROOT = Path("/sys/fs/cgroup")
# The device manager's directory is not under --root-dir (pluginapi.DevicePluginPath).
DEVICE_PLUGINS_DIR = Path("/var/lib/kubelet/device-plugins")
READY_TIMEOUT = 90.0
SLICES_WIPED = '"Deleted ResourceSlices"'  # the kubelet's start-up wipe of its node's slices
STOP_GRACE = 20.0


class RealNodeError(ReasonedError):
    """The real node could not start, or cannot run on this machine at all."""


@dataclass(frozen=True)
class NodeBinaries:
    kubelet: Path
    containerd: Path
    ctr: Path
    shim_dir: Path  # containerd finds containerd-shim-runc-v2 on its PATH
    runc: Path
    pause: Path
    crictl: Path

    @classmethod
    def resolve(cls, tools: ToolSet) -> NodeBinaries:
        return cls(
            kubelet=tools.binary("kubelet", "kubelet"),
            containerd=tools.binary("containerd", "containerd"),
            ctr=tools.binary("containerd", "ctr"),
            shim_dir=tools.binary("containerd", "containerd-shim-runc-v2").parent,
            runc=tools.binary("runc", "runc"),
            pause=tools.binary("pause", "pause"),
            crictl=tools.binary("crictl", "crictl"),
        )


def host_ip() -> str | None:
    """The first global IPv4 address of the host: the kubelet refuses a loopback node IP."""
    out = subprocess.run(
        ["ip", "-j", "-4", "addr", "show", "scope", "global"], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        return None
    for link in json.loads(out.stdout or "[]"):
        for addr in link.get("addr_info") or []:
            if addr.get("family") == "inet" and addr.get("local"):
                return str(addr["local"])
    return None


def unavailable_reason(tools: ToolSet) -> str | None:
    """Why a real node cannot run on this machine, or None when it can (as far as can be checked
    without starting it: a start failure says why in its own words)."""
    for component in NODE_COMPONENTS:
        try:
            status = tools.status(component)
        except ToolUnavailable as exc:
            return exc.message
        if not status.usable:
            return status.reason
    if os.geteuid() != 0:
        return "the kubelet and containerd need root (mounts, cgroups, network namespaces)"
    if not images.BUSYBOX.is_file():
        return (
            f"{images.BUSYBOX} is missing (Debian busybox-static builds the workload image); run 'make deps'"
        )
    if not (CGROUP_V1_ROOT / "memory").is_dir() and not (CGROUP_V1_ROOT / "cgroup.controllers").is_file():
        return f"no cgroup hierarchy under {CGROUP_V1_ROOT}"
    if host_ip() is None:
        return "the host has no global IPv4 address (the kubelet refuses a loopback node IP)"
    return None


def kubelet_config(
    *,
    node_dir: Path,
    runtime_socket: Path,
    ca_file: Path,
    cgroup_root: str,
    port: int,
    healthz_port: int,
) -> str:
    """The KubeletConfiguration, one comment per setting that this host (or the bed) needs."""
    return f"""\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These hosts mount cgroup v1 (hybrid); kubelet 1.35+ refuses v1 unless told not to.
failCgroupV1: false
# No systemd runs as PID 1 here, so cgroups are driven through cgroupfs (containerd matches it).
cgroupDriver: cgroupfs
# Its own cgroup subtree: a second node, or another engineer's bed, never shares kubepods.
cgroupRoot: {cgroup_root}
# Some of these machines have swap enabled; the kubelet refuses to start on swap by default.
failSwapOn: false
# This node's own containerd, not a host-wide /run/containerd socket.
containerRuntimeEndpoint: unix://{runtime_socket}
# Every listener on loopback and on a free port: other beds run on the same machine.
address: 127.0.0.1
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
# No kubelet API client but the tests; the serving cert is self-signed in --cert-dir.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {ca_file}
authorization:
  mode: AlwaysAllow
# Container logs under the node's own directory, not the host's /var/log/pods.
podLogsDir: {node_dir / "pod-logs"}
# Images cannot be pulled back here: never garbage-collect the imported ones.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The shared machine's disk may be fuller than the default 10-15 % thresholds; evicting the test
# Pods for it would be noise.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
# No static Pods and no cluster DNS on the bed.
staticPodPath: ""
clusterDNS: []
"""


def containerd_config(
    *,
    node_dir: Path,
    socket: Path,
    cni_conf_dir: Path,
    cni_bin_dir: Path,
    cdi_dir: Path,
    runc: Path,
    sandbox_image: str,
) -> str:
    ctd = node_dir / "ctd"
    return f"""\
# Config version 4 (containerd 2.3): the socket settings live in the grpc plugin sections; the
# pre-v3 top-level [grpc] table is silently ignored.
version = 4
root = '{ctd / "root"}'
state = '{ctd / "state"}'
temp = '{ctd / "tmp"}'
# No /etc/containerd/conf.d: the host's own containerd config (if any) must not leak in.
imports = []
# NRI listens on a host-wide socket (/var/run/nri/nri.sock) a second node would fight over;
# the others cannot work here (no btrfs/zfs/devmapper/erofs) and only log noise.
disabled_plugins = [
  'io.containerd.nri.v1.nri',
  'io.containerd.snapshotter.v1.btrfs',
  'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper',
  'io.containerd.snapshotter.v1.blockfile',
  'io.containerd.snapshotter.v1.erofs',
  'io.containerd.differ.v1.erofs',
  'io.containerd.mount-handler.v1.erofs',
]

[plugins]
  [plugins.'io.containerd.server.v1.grpc']
    address = '{socket}'
  [plugins.'io.containerd.server.v1.ttrpc']
    address = '{socket}.ttrpc'
  [plugins.'io.containerd.internal.v1.opt']
    path = '{ctd / "opt"}'
  [plugins.'io.containerd.shim.v1.manager']
    # Shim sockets under our own state, not the host-wide /run/containerd/s.
    socket_dir = '{ctd / "s"}'
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      # Nothing can be pulled: the sandbox image is Kubernetes' pause, built and imported locally.
      sandbox = '{sandbox_image}'
  [plugins.'io.containerd.cri.v1.runtime']
    # root here lacks CAP_SYS_RESOURCE: lowering a sandbox's oom_score_adj below containerd's own
    # fails ("failed to update /proc/self/oom_score_adj: Permission denied") unless clamped.
    restrict_oom_score_adj = true
    # The driver writes its CDI specs to the bed's CDI root; the kubelet passes their device IDs.
    enable_cdi = true
    cdi_spec_dirs = ['{cdi_dir}']
    # Sandbox netns under our state dir: /run/netns is shared with other beds and their leak checks.
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          # runc v1.4 built with seccomp; Debian's runc 1.1 is too old for containerd 2.x.
          BinaryName = '{runc}'
          Root = '{ctd / "runc"}'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{cni_bin_dir}']
      conf_dir = '{cni_conf_dir}'
      # Only the first conf (our shim's 00-*.conf), as with Multus installed as the node CNI.
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    # The streaming server (exec/attach) on loopback and an ephemeral port.
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
"""


def _read_sysctls() -> dict[str, str]:
    out = {}
    for name in KUBELET_SYSCTLS:
        with contextlib.suppress(OSError):
            out[name] = (Path("/proc/sys") / name).read_text().strip()
    return out


def _restore_sysctls(saved: Mapping[str, str]) -> list[str]:
    restored = []
    for name, value in saved.items():
        path = Path("/proc/sys") / name
        with contextlib.suppress(OSError):
            if path.read_text().strip() != value:
                path.write_text(value)
                restored.append(f"{name.replace('/', '.')}={value}")
    return restored


def _cgroup_hierarchies() -> list[Path]:
    if (CGROUP_V1_ROOT / "cgroup.controllers").is_file():
        return [CGROUP_V1_ROOT]  # unified (v2)
    return sorted(p for p in CGROUP_V1_ROOT.iterdir() if p.is_dir() and not p.is_symlink())


def _remove_cgroup_tree(root: Path) -> list[str]:
    """rmdir bottom-up (cgroup dirs cannot be removed recursively); returns what could not go."""
    if not root.is_dir():
        return []
    left = []
    for path in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        try:
            path.rmdir()
        except OSError:
            left.append(str(path))
    try:
        root.rmdir()
    except OSError:
        left.append(str(root))
    return left


def _mounts_under(prefix: Path) -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4].replace("\\040", " ")
        if mount_point == str(prefix) or mount_point.startswith(str(prefix) + "/"):
            out.append(mount_point)
    return out


def _pids_with(binary: Path, needle: str) -> list[int]:
    """Live processes running ``binary`` whose command line contains ``needle``: the shims that
    serve one containerd (their ``-address`` names its socket), never anyone else's."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(proc / "exe") == str(binary) and needle in (proc / "cmdline").read_text():
                pids.append(int(proc.name))
    return pids


class RealNode:
    """containerd + kubelet for one Node of the bed. ``start()``, then ``stop()`` (always)."""

    def __init__(
        self,
        *,
        api: client.ApiClient,
        node_name: str,
        kubeconfig: Path,
        ca_file: Path,
        node_dir: Path,
        root_dir: Path | None = None,
        cni_conf_dir: Path,
        cni_bin_dir: Path,
        cdi_dir: Path,
        tools: ToolSet,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.node_name = node_name
        self.kubeconfig = kubeconfig
        self.ca_file = ca_file
        self.dir = node_dir
        self._root_dir = root_dir or node_dir / "kubelet"
        self.cni_conf_dir = cni_conf_dir
        self.cni_bin_dir = cni_bin_dir
        self.cdi_dir = cdi_dir
        self.bin = NodeBinaries.resolve(tools)
        # The CNI plugins containerd runs inherit its environment (the fake node's sysfs root etc.).
        self.env = {**os.environ, **(env or {})}
        self.env["PATH"] = f"{self.bin.shim_dir}:{self.env.get('PATH', '/usr/bin:/bin')}"
        self.cgroup_root = f"/auto-sriov-{node_name}"
        self.containerd: ProcessRecord | None = None
        self.kubelet: ProcessRecord | None = None
        self._saved_sysctls: dict[str, str] = {}
        self.sandbox_image: images.Image | None = None
        self.workload_image: images.Image | None = None
        self.ports: dict[str, int] = {}
        self.teardown_notes: list[str] = []
        self.restored_sysctls: list[str] = []
        self._made_device_plugins_dir = False

    # -- paths ------------------------------------------------------------------------------

    @property
    def socket(self) -> Path:
        return self.dir / "ctd" / "c.sock"

    @property
    def root_dir(self) -> Path:
        """The kubelet's --root-dir: its plugin registry and plugins dirs live under it."""
        return self._root_dir

    @property
    def registry_dir(self) -> Path:
        return self.root_dir / "plugins_registry"

    @property
    def plugins_dir(self) -> Path:
        return self.root_dir / "plugins"

    @property
    def kubelet_log(self) -> Path:
        return self.dir / "kubelet.log"

    @property
    def containerd_log(self) -> Path:
        return self.dir / "containerd.log"

    # -- start ------------------------------------------------------------------------------

    def start(self) -> None:
        self._saved_sysctls = _read_sysctls()
        self._made_device_plugins_dir = not DEVICE_PLUGINS_DIR.parent.exists()
        self.dir.mkdir(parents=True, exist_ok=True)
        for sub in ("pod-logs", "images"):
            (self.dir / sub).mkdir(exist_ok=True)
        for hierarchy in _cgroup_hierarchies():
            # The kubelet requires its --cgroup-root to exist in every hierarchy it uses.
            (hierarchy / self.cgroup_root.lstrip("/")).mkdir(exist_ok=True)
        self._start_containerd()
        self._import_images()
        self.start_kubelet()

    def _start_containerd(self) -> None:
        # The cache directory is named after the Kubernetes version the pause source came from.
        tag = "kubernetes-" + self.bin.pause.parent.name.removeprefix("pause-")
        self.sandbox_image = images.pause_image(self.bin.pause, tag, self.dir / "images")
        config = self.dir / "containerd.toml"
        config.write_text(
            containerd_config(
                node_dir=self.dir,
                socket=self.socket,
                cni_conf_dir=self.cni_conf_dir,
                cni_bin_dir=self.cni_bin_dir,
                cdi_dir=self.cdi_dir,
                runc=self.bin.runc,
                sandbox_image=self.sandbox_image.ref,
            )
        )
        proc, self.containerd = self._launch(
            "containerd", [str(self.bin.containerd), "--config", str(config)], self.containerd_log
        )

        def up() -> bool:
            if proc.poll() is not None:
                raise RealNodeError("ContainerdExited", f"containerd exited: {log_tail(self.containerd_log)}")
            return self.socket.is_socket() and self.ctr("version", check=False).returncode == 0

        self._wait(up, 30, "containerd to serve its socket", self.containerd_log)

    def _launch(
        self, name: str, argv: Sequence[str], log: Path
    ) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
        # Through testbed.processes: its own process group, and it dies with the test session.
        return launch(name, argv, log, cwd=self.dir, die_with_parent=True, env=self.env)

    def ctr(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(self.bin.ctr), "--address", str(self.socket), "-n", CRI_NAMESPACE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and out.returncode != 0:
            raise RealNodeError("CtrFailed", f"ctr {' '.join(args)}: {(out.stdout + out.stderr).strip()}")
        return out

    def crictl(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(self.bin.crictl), "--runtime-endpoint", f"unix://{self.socket}", "--timeout", "30s", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and out.returncode != 0:
            raise RealNodeError(
                "CrictlFailed", f"crictl {' '.join(args)}: {(out.stdout + out.stderr).strip()}"
            )
        return out

    def _import_images(self) -> None:
        assert self.sandbox_image is not None
        self.workload_image = images.workload_image(self.dir / "images")
        for image in (self.sandbox_image, self.workload_image):
            # --local: straight into the content store and the CRI's snapshotter, no transfer service.
            self.ctr(
                "images", "import", "--local", "--snapshotter", "overlayfs", str(image.tarball), timeout=120
            )

    def start_kubelet(self) -> None:
        self.ports = {"kubelet": free_port(), "healthz": free_port()}
        config = self.dir / "kubelet-config.yaml"
        config.write_text(
            kubelet_config(
                node_dir=self.dir,
                runtime_socket=self.socket,
                ca_file=self.ca_file,
                cgroup_root=self.cgroup_root,
                port=self.ports["kubelet"],
                healthz_port=self.ports["healthz"],
            )
        )
        ip = host_ip()
        if ip is None:
            raise RealNodeError("NoNodeIP", "the host has no global IPv4 address for the kubelet's node IP")
        argv = [
            str(self.bin.kubelet),
            f"--config={config}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.root_dir}",
            f"--cert-dir={self.dir / 'kubelet-pki'}",
            f"--hostname-override={self.node_name}",
            # A loopback node IP is refused; the host's own address, nothing is served on it.
            f"--node-ip={ip}",
            # -v=4: the kubelet logs each NodePrepare/NodeUnprepareResources call, which the
            # lifecycle tests count.
            "--v=4",
        ]
        wiped = self._log_count(SLICES_WIPED)
        proc, self.kubelet = self._launch("kubelet", argv, self.kubelet_log)
        started = time.time()

        def ready() -> bool:
            if proc.poll() is not None:
                raise RealNodeError("KubeletExited", f"the kubelet exited: {log_tail(self.kubelet_log)}")
            # Ready, and past its start-up wipe of the node's ResourceSlices: whoever publishes
            # slices after this returns is not undone by the kubelet a moment later.
            return self._kubelet_ready_since(started) and self._log_count(SLICES_WIPED) > wiped

        self._wait(
            ready, READY_TIMEOUT, f"the kubelet to report Node {self.node_name} Ready", self.kubelet_log
        )

    def _kubelet_ready_since(self, started: float) -> bool:
        try:
            node = self.core.read_node(self.node_name)
        except ApiException:
            return False
        for cond in (node.status.conditions if node.status else None) or []:
            if cond.type == "Ready":
                heartbeat = cond.last_heartbeat_time.timestamp() if cond.last_heartbeat_time else 0
                return cond.status == "True" and cond.reason == "KubeletReady" and heartbeat >= started - 1
        return False

    def _wait(self, probe: Any, timeout: float, what: str, log: Path) -> None:
        try:
            wait_for(probe, timeout, what=what, interval=0.2)
        except WaitTimeout as exc:
            raise RealNodeError(
                "RealNodeNotReady", f"{exc.message}; last log lines:\n{log_tail(log)}"
            ) from None

    @property
    def workload_ref(self) -> str:
        """The locally built workload image (known before the import: it is reproducible)."""
        return f"{images.WORKLOAD_IMAGE}:{images.busybox_version()}"

    def log_tail(self, *, errors_only: bool = False, mentioning: str = "", lines: int = 25) -> str:
        try:
            text = self.kubelet_log.read_text(errors="replace")
        except FileNotFoundError:
            return "(no kubelet log)"
        picked = [
            line
            for line in text.splitlines()
            if (not errors_only or line.startswith("E")) and mentioning in line
        ]
        return "\n".join(picked[-lines:]) or "(nothing logged)"

    def _log_count(self, needle: str) -> int:
        try:
            return self.kubelet_log.read_text(errors="replace").count(needle)
        except FileNotFoundError:
            return 0

    def rpc_calls(
        self, method: str, driver: str = "sriovnetwork.k8snetworkplumbingwg.io", *, started: bool = False
    ) -> int:
        """How many ``method`` calls (NodePrepareResources, NodeUnprepareResources) the kubelet
        completed (or, with ``started``, began) to ``driver``'s plugin, from its own log; counted
        across kubelet restarts (the log is appended to)."""
        try:
            text = self.kubelet_log.read_text(errors="replace")
        except FileNotFoundError:
            return 0
        marker = f'driverName="{driver}"'
        needle = f'"Calling {method} rpc"' if started else f'"Done calling {method} rpc"'
        return sum(1 for line in text.splitlines() if needle in line and marker in line)

    # -- kubelet control (lifecycle tests) ---------------------------------------------------

    def kubelet_alive(self) -> bool:
        return self.kubelet is not None and processes.is_running(self.kubelet.pid, self.kubelet.start_ticks)

    def stop_kubelet(self, *, kill: bool = False) -> None:
        if self.kubelet is None:
            return
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.kubelet.pid, signal.SIGKILL)
        processes.stop([self.kubelet], grace=STOP_GRACE)
        self.kubelet = None

    def restart_kubelet(self) -> None:
        self.stop_kubelet()
        self.start_kubelet()

    # -- what runs on it ---------------------------------------------------------------------

    def sandboxes(self, pod_uid: str | None = None) -> list[dict[str, Any]]:
        """The CRI's Pod sandboxes (``crictl pods``), newest first; optionally of one Pod."""
        args = ["pods", "-o", "json"]
        if pod_uid:
            args += ["--label", f"io.kubernetes.pod.uid={pod_uid}"]
        items: list[dict[str, Any]] = json.loads(self.crictl(*args).stdout or "{}").get("items") or []
        return sorted(items, key=lambda s: int(s.get("createdAt") or 0), reverse=True)

    def running_sandboxes(self) -> list[dict[str, Any]]:
        return [s for s in self.sandboxes() if s.get("state") == "SANDBOX_READY"]

    def ready_sandbox(self, pod_uid: str) -> dict[str, Any]:
        ready = [s for s in self.sandboxes(pod_uid) if s.get("state") == "SANDBOX_READY"]
        if not ready:
            raise RealNodeError("NoSandbox", f"containerd has no ready sandbox for Pod UID {pod_uid}")
        return ready[0]

    def netns_path(self, sandbox_id: str) -> str:
        info = json.loads(self.crictl("inspectp", "-o", "json", sandbox_id).stdout)
        for ns in info["info"]["runtimeSpec"]["linux"]["namespaces"]:
            if ns["type"] == "network" and ns.get("path"):
                return str(ns["path"])
        raise RealNodeError("NoNetns", f"sandbox {sandbox_id} has no network namespace path")

    def sandbox_pid(self, sandbox_id: str) -> int:
        info = json.loads(self.crictl("inspectp", "-o", "json", sandbox_id).stdout)
        return int(info["info"]["pid"])

    def containers(self, pod_uid: str) -> list[dict[str, Any]]:
        out = self.crictl("ps", "-a", "-o", "json", "--label", f"io.kubernetes.pod.uid={pod_uid}")
        items: list[dict[str, Any]] = json.loads(out.stdout or "{}").get("containers") or []
        return items

    # -- stop ---------------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Stop everything and undo what the kubelet and containerd changed on the host. Returns
        what it had to clean up by force (empty after an orderly run)."""
        notes: list[str] = []
        self.stop_kubelet()
        if self.containerd is not None and processes.is_running(
            self.containerd.pid, self.containerd.start_ticks
        ):
            notes += self._remove_sandboxes()
            killed = processes.stop([self.containerd], grace=STOP_GRACE)
            notes += [f"{n} needed SIGKILL" for n in killed]
            self.containerd = None
        shim = self.bin.shim_dir / "containerd-shim-runc-v2"
        # A removed sandbox's shim exits on its own shortly after; only one that stays is killed.
        with contextlib.suppress(WaitTimeout):
            wait_for(lambda: not _pids_with(shim, str(self.socket)), 5, what="shims to exit", interval=0.1)
        for pid in _pids_with(shim, str(self.socket)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                notes.append(f"killed a leftover shim (pid {pid})")
        # The kubelet bind-mounts its --root-dir onto itself (shared propagation) and mounts each
        # Pod's projected volumes below it; containerd mounts rootfs and shm under its state.
        for mount in sorted(_mounts_under(self.dir) + _mounts_under(self.root_dir), key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        for hierarchy in _cgroup_hierarchies() if CGROUP_V1_ROOT.is_dir() else []:
            left = _remove_cgroup_tree(hierarchy / self.cgroup_root.lstrip("/"))
            notes += [f"cgroup left: {p}" for p in left[:3]]
        restored = _restore_sysctls(self._saved_sysctls)
        if self._made_device_plugins_dir:
            # Only the kubelet's own socket and checkpoint are in it; no device plugin runs here.
            shutil.rmtree(DEVICE_PLUGINS_DIR.parent, ignore_errors=True)
        self.teardown_notes = notes
        self.restored_sysctls = restored
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.root_dir, ignore_errors=True)
        return notes

    def _remove_sandboxes(self) -> list[str]:
        """Sandboxes the kubelet left (a force-deleted Pod, a stop mid-test): CRI stop runs CNI DEL
        for each, then remove deletes it and its netns."""
        notes = []
        with contextlib.suppress(RealNodeError, subprocess.SubprocessError, json.JSONDecodeError):
            for sandbox in self.sandboxes():
                sid = sandbox["id"]
                meta = sandbox.get("metadata") or {}
                if sandbox.get("state") == "SANDBOX_READY":
                    # A stopped one is only waiting for the kubelet's garbage collection.
                    notes.append(f"stopped a running sandbox of {meta.get('namespace')}/{meta.get('name')}")
                self.crictl("stopp", sid, check=False)
                self.crictl("rmp", "-f", sid, check=False)
        return notes
