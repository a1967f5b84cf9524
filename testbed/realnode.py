"""A real node for the bed: containerd + runc + the real kubelet, each in its own directories.

The kubelet takes over the bed's Node object (``--hostname-override``), runs Pods through
containerd's CRI with the bed's CNI configuration directory (our cni-shim's conf first), and runs
the DRA plugin registry at ``<root-dir>/plugins_registry``, where the driver registers over its
real sockets. Images are built locally (testbed/images.py) and imported; nothing is pulled.

What the host needed, and why, is commented next to each setting of the kubelet's and
containerd's configurations (testbed/realnode_config.py). Teardown (:meth:`RealNode.stop`) leaves
nothing behind (testbed/host_state.py): it stops and removes every sandbox through the CRI (CNI DEL
included), stops the kubelet and containerd, kills only shims that serve this containerd, unmounts
what containerd mounted under its dirs, removes the node's cgroups and restores the sysctls the
kubelet changed.
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
from testbed import host_state, images, processes, realnode_config
from testbed.controlplane import FEATURE_GATES
from testbed.nodeaddress import NodeAddress
from testbed.nodemounts import NodeMounts
from testbed.processes import ProcessRecord, free_port, launch, log_tail
from testbed.tools import ToolSet, ToolUnavailable
from testbed.waiting import WaitTimeout, wait_for

NODE_COMPONENTS = ("kubelet", "containerd", "runc", "pause", "crictl")
CRI_NAMESPACE = "k8s.io"  # containerd's namespace for everything the CRI plugin manages
# The device manager's directory is not under --root-dir (pluginapi.DevicePluginPath).
KUBELET_ROOT = Path("/var/lib/kubelet")
DEVICE_PLUGINS_DIR = KUBELET_ROOT / "device-plugins"
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
    if (
        not (host_state.CGROUP_V1_ROOT / "memory").is_dir()
        and not (host_state.CGROUP_V1_ROOT / "cgroup.controllers").is_file()
    ):
        return f"no cgroup hierarchy under {host_state.CGROUP_V1_ROOT}"
    if host_ip() is None:
        return "the host has no global IPv4 address (the kubelet refuses a loopback node IP)"
    return None


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
        mounts: NodeMounts | None = None,
        product_images: Sequence[Path] = (),
        address: NodeAddress | None = None,
    ) -> None:
        """``mounts``: run containerd and the kubelet in this node's own mount namespace
        (testbed/nodemounts.py), where the kubelet's root directory is ``/var/lib/kubelet``: what
        the product's DaemonSets need. Without it both run in the host's, on the bed's paths.
        ``product_images``: OCI archives imported before the kubelet starts, so no Pod of the
        product ever waits in an image pull back-off. ``address``: the node's own IP, made for it
        (testbed/nodeaddress.py); the host's address otherwise."""
        self.api = api
        self.mounts = mounts
        self.address = address
        self.product_images = list(product_images)
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
    def kubelet_root(self) -> Path:
        """The kubelet's --root-dir as the kubelet itself sees it."""
        return KUBELET_ROOT if self.mounts is not None else self.root_dir

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
        self._saved_sysctls = host_state.read_sysctls()
        # In its own mount namespace the node's device-plugin directory is under its root dir.
        self._made_device_plugins_dir = self.mounts is None and not DEVICE_PLUGINS_DIR.parent.exists()
        self.dir.mkdir(parents=True, exist_ok=True)
        for sub in ("pod-logs", "images"):
            (self.dir / sub).mkdir(exist_ok=True)
        for hierarchy in host_state.cgroup_hierarchies():
            # The kubelet requires its --cgroup-root to exist in every hierarchy it uses.
            (hierarchy / self.cgroup_root.lstrip("/")).mkdir(exist_ok=True)
        if self.mounts is not None:
            self.mounts.start()
        if self.address is not None:
            self.address.add()
        self._start_containerd()
        self._import_images()
        self.start_kubelet()

    def _start_containerd(self) -> None:
        # The cache directory is named after the Kubernetes version the pause source came from.
        tag = "kubernetes-" + self.bin.pause.parent.name.removeprefix("pause-")
        self.sandbox_image = images.pause_image(self.bin.pause, tag, self.dir / "images")
        config = self.dir / "containerd.toml"
        config.write_text(
            realnode_config.containerd_config(
                node_dir=self.dir,
                socket=self.socket,
                cni_conf_dir=self.cni_conf_dir,
                cni_bin_dir=self.cni_bin_dir,
                cdi_dir=self.cdi_dir,
                runc=self.bin.runc,
                sandbox_image=self.sandbox_image.ref,
                netns_under_state_dir=self.mounts is None,
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
        if self.mounts is not None:
            argv = self.mounts.enter(argv)
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
        for tarball in (self.sandbox_image.tarball, self.workload_image.tarball, *self.product_images):
            self.import_image(tarball)

    def import_image(self, tarball: Path) -> None:
        """An OCI archive into the node's image store, as a registry pull would put it there."""
        # --local: straight into the content store and the CRI's snapshotter, no transfer service.
        self.ctr("images", "import", "--local", "--snapshotter", "overlayfs", str(tarball), timeout=180)

    def start_kubelet(self) -> None:
        self.ports = {"kubelet": free_port(), "healthz": free_port()}
        config = self.dir / "kubelet-config.yaml"
        config.write_text(
            realnode_config.kubelet_config(
                node_dir=self.dir,
                runtime_socket=self.socket,
                ca_file=self.ca_file,
                cgroup_root=self.cgroup_root,
                port=self.ports["kubelet"],
                healthz_port=self.ports["healthz"],
                feature_gates=FEATURE_GATES,
            )
        )
        ip = self.address.ip if self.address is not None else host_ip()
        if ip is None:
            raise RealNodeError("NoNodeIP", "the host has no global IPv4 address for the kubelet's node IP")
        argv = [
            str(self.bin.kubelet),
            f"--config={config}",
            f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.kubelet_root}",
            f"--cert-dir={self.dir / 'kubelet-pki'}",
            f"--hostname-override={self.node_name}",
            # A loopback node IP is refused: the node's own address, or the host's.
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

    def netns_files(self) -> set[str]:
        """The sandbox network namespaces containerd holds under its state dir now (a node whose
        CNI runs as the DaemonSet keeps them in the host's /run/netns instead: empty here)."""
        # netns_mounts_under_state_dir puts them under the CRI plugin's own state directory.
        netns = self.dir / "ctd" / "state" / "io.containerd.grpc.v1.cri" / "netns"
        return {str(p) for p in netns.iterdir()} if netns.is_dir() else set()

    def restart_containerd(self) -> None:
        """containerd crashes (SIGKILL to it alone: its shims, their sandboxes and any CNI call it
        had started run on, as under systemd's KillMode=process) and starts again on its state."""
        assert self.containerd is not None, "start() first"
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.containerd.pid, signal.SIGKILL)
        processes.stop([self.containerd], grace=STOP_GRACE)  # reaps it
        self._start_containerd()

    # -- power loss and boot (testbed/reboot.py) --------------------------------------------

    def power_off(self, also: Sequence[int] = ()) -> None:
        """What a power loss does to this node's kernel and tmpfs: every process of it dies at once
        (the kubelet, containerd, every shim, container and CNI plugin, and ``also``: other
        processes of the node, with their children), each mount of it goes (rootfs, shm, the
        Pods' volumes, the sandboxes' network namespace mounts, so the namespaces and the veths in
        them die with their last user), its cgroups vanish and containerd's state directory, its
        /run, is emptied. containerd's root (its /var/lib: images, the sandboxes' metadata) and
        the kubelet's root directory stay, as they would on disk."""
        shim = self.bin.shim_dir / "containerd-shim-runc-v2"
        victims = host_state.kill_trees(
            [
                *(r.pid for r in (self.kubelet, self.containerd) if r is not None),
                *host_state.pids_with(shim, str(self.socket)),
                *host_state.cgroup_pids(self.cgroup_root),
                *also,
            ]
        )
        # A shim that containerd was starting daemonizes (its parent becomes init) and can slip
        # past the first listing: look again until no shim of this node and no container is left.
        for _ in range(50):
            left = [
                pid
                for pid in [
                    *host_state.pids_with(shim, str(self.socket)),
                    *host_state.cgroup_pids(self.cgroup_root),
                ]
                if processes.start_ticks(pid)
            ]
            if not left:
                break
            victims += host_state.kill_trees(left)
            time.sleep(0.1)  # the killed ones are still listed until they are reaped
        # Reaped (the kubelet and containerd are our children) and really gone before the unmounts.
        processes.stop([r for r in (self.kubelet, self.containerd) if r is not None], grace=STOP_GRACE)
        self.kubelet = self.containerd = None
        wait_for(
            lambda: not any(processes.start_ticks(pid) for pid in victims if pid not in also),
            STOP_GRACE,
            what=f"every process of {self.node_name} to die",
            interval=0.1,
        )
        for mount in sorted(
            host_state.mounts_under(self.dir) + host_state.mounts_under(self.root_dir), key=len, reverse=True
        ):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        for hierarchy in host_state.cgroup_hierarchies() if host_state.CGROUP_V1_ROOT.is_dir() else []:
            host_state.remove_cgroup_tree(hierarchy / self.cgroup_root.lstrip("/"))
        shutil.rmtree(self.dir / "ctd" / "state", ignore_errors=True)

    def boot(self) -> None:
        """Start containerd and the kubelet again on what stayed on disk (no image import: the
        images are in containerd's root)."""
        for hierarchy in host_state.cgroup_hierarchies():
            (hierarchy / self.cgroup_root.lstrip("/")).mkdir(exist_ok=True)
        self._start_containerd()
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

    def container_log(self, pod_uid: str, container: str, *, restarts: bool = True) -> str:
        """What a container of a Pod on this node wrote, from the kubelet's log files (CRI format,
        one file per start): every start's, oldest first, or with ``restarts=False`` the newest's."""
        files = sorted(
            self.dir.glob(f"pod-logs/*_{pod_uid}/{container}/*.log"),
            key=lambda p: int(p.stem) if p.stem.isdigit() else -1,
        )
        lines: list[str] = []
        partial = ""
        for path in files if restarts else files[-1:]:
            with contextlib.suppress(OSError):
                for record in path.read_text(errors="replace").splitlines():
                    # <time> <stream> <P|F> <text>: P is a fragment of a longer line.
                    parts = record.split(" ", 3)
                    if len(parts) == 4:
                        partial += parts[3]
                        if parts[2] != "P":
                            lines.append(partial)
                            partial = ""
        return "\n".join(lines)

    def container_pid(self, pod_uid: str, container: str) -> int:
        """The host PID of a running container's first process."""
        for item in self.containers(pod_uid):
            if item["metadata"]["name"] == container and item["state"] == "CONTAINER_RUNNING":
                info = json.loads(self.crictl("inspect", "-o", "json", item["id"]).stdout)
                return int(info["info"]["pid"])
        raise RealNodeError("NoContainer", f"no running container {container} in Pod UID {pod_uid}")

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
            wait_for(
                lambda: not host_state.pids_with(shim, str(self.socket)),
                5,
                what="shims to exit",
                interval=0.1,
            )
        for pid in host_state.pids_with(shim, str(self.socket)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                notes.append(f"killed a leftover shim (pid {pid})")
        # The kubelet bind-mounts its --root-dir onto itself (shared propagation) and mounts each
        # Pod's projected volumes below it; containerd mounts rootfs and shm under its state.
        for mount in sorted(
            host_state.mounts_under(self.dir) + host_state.mounts_under(self.root_dir), key=len, reverse=True
        ):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        for hierarchy in host_state.cgroup_hierarchies() if host_state.CGROUP_V1_ROOT.is_dir() else []:
            left = host_state.remove_cgroup_tree(hierarchy / self.cgroup_root.lstrip("/"))
            notes += [f"cgroup left: {p}" for p in left[:3]]
        if self.mounts is not None:
            self.mounts.stop()
        if self.address is not None:
            self.address.remove()
        restored = host_state.restore_sysctls(self._saved_sysctls)
        if self._made_device_plugins_dir:
            # Only the kubelet's own socket and checkpoint are in it; no device plugin runs here.
            shutil.rmtree(DEVICE_PLUGINS_DIR.parent, ignore_errors=True)
        self.teardown_notes = notes
        self.restored_sysctls = restored
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.root_dir, ignore_errors=True)
        return notes

    def remove_stopped_sandboxes(self) -> None:
        """Remove the sandboxes that only wait for the kubelet's garbage collection. Their CNI
        DEL already ran, but containerd runs it again on removal: to be done while the node's
        CNI still serves (an installed product is uninstalled before its node stops, and each
        DEL through a shim with no daemon behind it would wait out the shim's time budget)."""
        with contextlib.suppress(RealNodeError, subprocess.SubprocessError, json.JSONDecodeError):
            for sandbox in self.sandboxes():
                if sandbox.get("state") != "SANDBOX_READY":
                    self.crictl("rmp", "-f", sandbox["id"], check=False)

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
