"""The node's CNI as the container runtime finds it (``NodeCni``): a bin dir with the Go plugins
built by ``make tools``, our Python plugins and ``cni-shim`` (:func:`make_cni_bin_dir`, also the
bench's), a conf dir with ``cni-shim`` first and ptp + host-local as the cluster network, real
whereabouts for the rails, and in thick mode ``cni-shim-daemon`` reading each Pod live on ADD.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from cni_shim import launcher
from plugins.sriov import state as sriov_state
from sriov_contract.errors import ReasonedError
from testbed import bootstrap
from testbed.deployment import BASE_DIR
from testbed.processes import BIN, Process
from testbed.tools import REPO_ROOT, ToolSet
from testbed.waiting import wait_for

if TYPE_CHECKING:
    from testbed.bed import TestBed
    from testbed.fakenode import FakeNode
    from testbed.installed import InstalledDaemon

# The name of cni-shim's own network in the node's conf dir (Multus's default).
SHIM_NETWORK = "multus-cni-network"
# Where cnitool's libcni caches each attachment's result (libcni's default; cnitool sets no other).
LIBCNI_CACHE_DIR = Path("/var/lib/cni")

GO_PLUGINS = ("host-local", "static", "tuning", "host-device", "ptp", "loopback")
PY_PLUGINS = {"sriov": "plugins.sriov.__main__", "recorder": "plugins.recorder", "faulty": "plugins.faulty"}
WHEREABOUTS_CRDS = (
    "whereabouts.cni.cncf.io_ippools.yaml",
    "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml",
)


def make_cni_bin_dir(
    dest: Path, tools: ToolSet | None = None, plugin_env: Mapping[str, str] | None = None
) -> Path:
    """Fill ``dest`` with the Go plugins that are built (hard links) and our Python test plugins;
    ``plugin_env``: defaults the Python plugins set for themselves (the fake node's sysfs), so
    they find the node's simulated hardware whoever runs them, the runtime or the CNI DaemonSet."""
    tools = tools or ToolSet()
    dest.mkdir(parents=True, exist_ok=True)
    for component, names in (("plugins", GO_PLUGINS), ("whereabouts", ("whereabouts",))):
        status = tools.status(component)
        for name in names:
            if status.usable and (status.directory / name).exists():
                (dest / name).unlink(missing_ok=True)
                # A file, not a symlink: the CNI DaemonSet runs plugins chrooted into the host's
                # root, where it resolves each plugin's path before the chroot.
                try:
                    os.link(status.directory / name, dest / name)
                except OSError:
                    shutil.copy2(status.directory / name, dest / name)
    for name, module in PY_PLUGINS.items():
        wrapper = dest / name
        # plugins/ is test code, not installed: the wrapper puts the repository root on sys.path.
        defaults = "".join(f"os.environ.setdefault({k!r}, {v!r})\n" for k, v in (plugin_env or {}).items())
        wrapper.write_text(
            f"#!{sys.executable}\nimport os\nimport sys\n{defaults}sys.path.insert(0, {str(REPO_ROOT)!r})\n"
            f"from {module} import main\n\nmain()\n"
        )
        wrapper.chmod(0o755)
    return dest


def ptp_host_local(subnet: str, data_dir: Path) -> dict[str, Any]:
    """A pod network plugin entry: ptp, host-local IPAM keeping its allocations in `data_dir`."""
    return {"type": "ptp", "ipam": {"type": "host-local", "subnet": subnet, "dataDir": str(data_dir)}}


def rbac_rules(path: Path, kind: str) -> list[dict[str, Any]]:
    return [
        rule for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == kind for rule in d["rules"]
    ]


def answers_in(log: str, command: str, pod: str) -> int:
    """How many ``command`` requests for ``pod`` (namespace/name) a daemon's JSON log says were ok."""
    count = 0
    for line in log.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            count += (
                isinstance(entry, dict) and entry.get("msg") == f"{command} ok" and entry.get("pod") == pod
            )
    return count


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def serving(socket_dir: Path) -> bool:
    """A daemon accepts on a socket in ``socket_dir``: not merely present, since a killed daemon
    leaves its socket file behind."""
    return socket_dir.is_dir() and any(p.is_socket() and _accepts(p) for p in socket_dir.iterdir())


class NodeCni:
    """One node's CNI: ``cni-shim`` first in its conf dir, ptp + host-local as the cluster network,
    real whereabouts for the rails, the CNI side's RBAC, and in thick mode ``cni-shim-daemon``
    with live reads on ADD. Everything lives under the stack's run directory."""

    def __init__(
        self,
        bed: TestBed,
        run: Path,
        *,
        thick: bool,
        pod_subnet: str,
        node: Callable[[], FakeNode],
        say: Callable[[str], None],
    ) -> None:
        self.bed, self.run, self.thick, self.pod_subnet = bed, run, thick, pod_subnet
        self.node, self.say = node, say
        self.daemon: Process | None = None
        # Where the daemon runs as the CNI DaemonSet's Pod instead (testbed/installed.py).
        self.installed: InstalledDaemon | None = None

    @property
    def bin_dir(self) -> Path:
        return self.run / "bin"

    @property
    def net_dir(self) -> Path:
        return self.run / "net.d"

    @property
    def host_local_dir(self) -> Path:
        return self.run / "host-local"

    @property
    def shim_cache(self) -> Path:
        return self.run / "shim-cache"

    @property
    def sriov_data(self) -> Path:
        return self.run / "sriov-data"

    @property
    def socket_dir(self) -> Path:
        return self.run / "sock"

    def install_whereabouts(self) -> None:
        # The release's crds/ also holds its DaemonSet; install only the two CRDs the CNI uses.
        crds = self.run / "whereabouts-crds"
        crds.mkdir()
        for name in WHEREABOUTS_CRDS:
            shutil.copy(self.bed.tool_dir("whereabouts") / "crds" / name, crds / name)
        bootstrap.install_crds(self.bed.api_client, crds)
        (self.run / "whereabouts.conf").write_text(
            json.dumps({"datastore": "kubernetes", "kubernetes": {"kubeconfig": str(self.bed.kubeconfig)}})
        )

    def whereabouts_ipam(self) -> dict[str, Any]:
        """Where whereabouts finds its datastore: what the examples' ipam blocks get merged in."""
        return {
            "configuration_path": str(self.run / "whereabouts.conf"),
            "kubernetes": {"kubeconfig": str(self.bed.kubeconfig)},
        }

    def install(self, *, host_shim: bool = True) -> None:
        """The node's CNI: cni-shim first in the conf dir, ptp + host-local as the cluster network.
        Without ``host_shim`` only the plugins and the cluster network: the CNI DaemonSet's init
        container installs cni-shim and its configuration."""
        make_cni_bin_dir(self.bin_dir, self.bed.tools, self.delegate_env())
        self.net_dir.mkdir()
        podnet = self.net_dir / "10-podnet.conflist"
        podnet.write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "podnet",
                    "plugins": [ptp_host_local(self.pod_subnet, self.host_local_dir)],
                },
                indent=2,
            )
        )
        if not host_shim:
            return
        launcher.install(self.bin_dir / "cni-shim")
        common = {
            "cniDir": str(self.shim_cache),
            "binDir": str(self.bin_dir),
            "confDir": str(self.run / "multus.d"),
            "liveNetworkConfigOnAdd": True,
            "logFile": str(self.run / "cni-shim.log"),
            "logLevel": "verbose",
            # The shim tells a VF by its physfn link: on the bed, in the fake node's tree.
            "sysfsRoot": str(self.node().sysfs_root),
            # The real kubelet's pod-resources API under its --root-dir (the resourceName path).
            "podResourcesSocket": str(self.run / "kubelet" / "pod-resources" / "kubelet.sock"),
        }
        shim: dict[str, Any] = {
            "cniVersion": "1.0.0",
            "name": SHIM_NETWORK,
            "type": "cni-shim",
            "clusterNetwork": str(podnet),
        }
        if self.thick:
            shim["daemonSocketDir"] = str(self.socket_dir)
            daemon = {
                "cniVersion": "1.0.0",
                "socketDir": str(self.socket_dir),
                "kubeconfig": str(self.bed.kubeconfig_for("cni")),
                "logToStderr": True,
                **common,
            }
            (self.run / "daemon-config.json").write_text(json.dumps(daemon, indent=2))
        else:
            shim.update(common, kubeconfig=str(self.bed.kubeconfig_for("cni")))
        (self.net_dir / "00-auto-sriov.conf").write_text(json.dumps(shim, indent=2))

    def grant(self) -> None:
        """Exactly the deployed CNI RBAC (deploy/base/cni-rbac.yaml), for a client-cert user."""
        self.bed.grant(self.bed.user_of("cni"), rbac_rules(BASE_DIR / "cni-rbac.yaml", "ClusterRole"))

    def delegate_env(self) -> dict[str, str]:
        """The environment the CNI plugins run with: the fake node's sysfs, the sriov plugin's data."""
        return {**self.node().env(), "SRIOV_CNI_DATA_DIR": str(self.sriov_data)}

    def start_daemon(self) -> None:
        if self.installed is not None:
            self.say("Waiting for the cni-shim-daemon Pod to serve its socket (kubelet, DaemonSet)...")
            self.installed.wait_serving()
            return
        self.say("Starting cni-shim-daemon (thick mode, live reads on ADD)")
        sock = self.socket_dir
        env = {**os.environ, **self.delegate_env()}
        self.daemon = Process(
            [str(BIN / "cni-shim-daemon"), "--config", str(self.run / "daemon-config.json")],
            env,
            self.run / "daemon.log",
        )
        daemon = self.daemon

        def listening() -> bool:
            if not daemon.alive():
                raise ReasonedError("DaemonExited", f"cni-shim-daemon exited: {daemon.output()}")
            return serving(sock)

        wait_for(listening, 30, what=f"cni-shim-daemon to listen in {sock}")

    def stop_daemon(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()

    def daemon_answers(self, command: str, pod: str) -> int:
        """How many ``command`` requests for ``pod`` (namespace/name) cni-shim-daemon logged as ok."""
        if self.installed is not None:
            return answers_in(self.installed.pod.log(), command, pod)
        if self.daemon is None:
            return 0
        return answers_in(self.daemon.log.read_text(errors="replace"), command, pod)

    def calls_in_flight(self, command: str) -> list[int]:
        """PIDs of this node's ``cni-shim`` executables running ``command`` (ADD, DEL) now."""
        shim, wanted = str(self.bin_dir / "cni-shim").encode(), f"CNI_COMMAND={command}".encode()
        pids = []
        for proc in Path("/proc").iterdir():
            # The launcher is a script: the interpreter is argv[0], the shim's path an argument.
            with contextlib.suppress(OSError):
                if (
                    proc.name.isdigit()
                    and shim in (proc / "cmdline").read_bytes().split(b"\0")
                    and wanted in (proc / "environ").read_bytes().split(b"\0")
                ):
                    pids.append(int(proc.name))
        return pids

    @contextlib.contextmanager
    def vf_locks(self, pcis: Sequence[str]) -> Iterator[None]:
        """Hold the sriov plugin's own per-VF locks. Its DEL keeps a VF's lock from the IPAM release
        to the VF's move back to the host, so what is read under them never sees a DEL half-way."""
        with contextlib.ExitStack() as held:
            for pci in sorted(pcis):  # one order for everyone; the plugin takes a single lock
                held.enter_context(sriov_state.device_lock(str(self.sriov_data), pci))
            yield

    def host_local_leases(self) -> list[str]:
        """Cluster-network addresses host-local still holds: one file per leased IP in its dataDir."""
        if not self.host_local_dir.is_dir():
            return []
        leases = [
            p
            for p in sorted(self.host_local_dir.rglob("*"))
            if p.is_file() and p.name != "lock" and not p.name.startswith("last_reserved_ip")
        ]
        return [f"host-local lease {p.name} ({' '.join(p.read_text().split()[:1])})" for p in leases]

    def cache_files(self, container_ids: Collection[str]) -> list[str]:
        """Cache files naming one of these container IDs: cni-shim's delegate cache and libcni's."""
        found = []
        for root in (self.shim_cache, LIBCNI_CACHE_DIR):
            if root.is_dir():
                found += [
                    str(p)
                    for p in root.rglob("*")
                    if p.is_file() and any(cid in p.name for cid in container_ids)
                ]
        return sorted(found)

    def logs(self) -> list[str]:
        parts = []
        if self.installed is not None:
            parts.append(f"--- cni-shim-daemon Pod ---\n{self.installed.pod.log()[-4000:]}")
        if self.daemon is not None:
            parts.append(f"--- cni-shim-daemon ({self.daemon.log}) ---\n{self.daemon.output()}")
        shim_log = self.run / "cni-shim.log"
        if shim_log.exists():
            parts.append(f"--- cni-shim ---\n{shim_log.read_text(errors='replace')[-4000:]}")
        return parts
