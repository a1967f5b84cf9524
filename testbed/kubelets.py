"""The kubelet a stack runs on its node, behind one interface: the real one (testbed/realnode.py:
containerd, runc and the kubelet built from source) or, where that cannot run, the simulated one
(testbed/kubelet_sim.py, speaking to the driver through testbed/fake_kubelet.py).

The stack, the scenario and the teardown checks ask either kubelet the same questions: how a Pod
must look to run on it, where a Pod's sandbox network namespace is, how many NodePrepareResources
calls it made, and which sandboxes (and host veths) this run made and left.
"""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pyroute2 import netns

from sriov_contract import keys
from sriov_contract.errors import ReasonedError
from testbed import realnode
from testbed.fake_kubelet import FakeKubelet, KubeletDirs, wait_for_socket
from testbed.kubelet_sim import Cnitool, PodRecord, Sandbox, SimulatedKubelet
from testbed.netlinks import host_link
from testbed.nodeaddress import NodeAddress
from testbed.nodecni import SHIM_NETWORK
from testbed.nodemounts import NodeMounts
from testbed.waiting import WaitTimeout, wait_for

if TYPE_CHECKING:
    from testbed.bed import TestBed
    from testbed.nodecni import NodeCni

REAL, SIM = "real", "sim"  # which kubelet a Stack runs
# How long a Running Pod's sandbox may take to show as ready in the CRI's listing.
SANDBOX_READY_TIMEOUT = 30.0


@dataclass(frozen=True)
class ObservedSandbox:
    """A real kubelet's Pod sandbox as this run saw it running."""

    namespace: str
    pod: str
    netns_path: str
    container_id: str


MadeSandboxes = tuple[list[Sandbox] | list[ObservedSandbox], set[str]]


class Kubelet(Protocol):
    """What the stack asks of its node's kubelet, whichever runs."""

    kind: str

    def start(self) -> None: ...

    def runnable(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """The Pod as this node can run it."""
        ...

    def start_errors(self, pod_name: str) -> str:
        """What the kubelet reported while failing to start the Pod (for a timeout's message)."""
        ...

    def netns_path(self, pod_uid: str) -> str: ...

    def prepare_calls(self) -> int:
        """NodePrepareResources calls to our driver so far."""
        ...

    def sandboxes_made(self) -> MadeSandboxes:
        """Every sandbox this run's kubelet made, and the host links their ADDs reported."""
        ...

    def leftover_netns(self) -> list[str]: ...

    def leftover_host_links(self) -> list[str]: ...

    def drain(self) -> None:
        """Wait (briefly) until no sandbox runs any more."""
        ...

    def stop(self) -> list[str]:
        """Stop it; returns the sandboxes it still held (each a leak of this run)."""
        ...

    def sweep(self, cache_files: Sequence[str]) -> None:
        """Remove what this run's sandboxes left that nothing else will."""
        ...

    def logs(self) -> str: ...


class RealKubelet:
    """containerd, runc and the real kubelet taking over the node (testbed/realnode.py); the
    sandboxes the run saw are recorded as it sees them, for the teardown checks."""

    kind = REAL

    def __init__(
        self,
        bed: TestBed,
        *,
        node_name: str,
        run: Path,
        dirs: KubeletDirs,
        cni: NodeCni,
        binds: Callable[[], Mapping[Path, Path]] | None = None,
        product_images: Callable[[], Sequence[Path]] = tuple,
        address: NodeAddress | None = None,
    ) -> None:
        """``binds``: the node's own mount namespace (testbed/nodemounts.py), as the product's
        DaemonSets need; ``product_images``: OCI archives its containerd imports first;
        ``address``: the node's own IP (testbed/nodeaddress.py)."""
        self.bed, self.node_name, self.run, self.dirs, self.cni = bed, node_name, run, dirs, cni
        self.binds, self.product_images, self.address = binds, product_images, address
        self._node: realnode.RealNode | None = None
        # The sandboxes as the run observed them (sandbox ID -> record), and the host veths their
        # CNI ADDs reported: the teardown checks' "made by this run".
        self.observed: dict[str, ObservedSandbox] = {}
        self.observed_links: set[str] = set()

    @property
    def node(self) -> realnode.RealNode:
        assert self._node is not None, "a Stack on the real kubelet, after up()"
        return self._node

    def start(self) -> None:
        self._node = realnode.RealNode(
            api=self.bed.api_client,
            node_name=self.node_name,
            kubeconfig=self.bed.kubeconfig,
            ca_file=self.bed.ca_file,
            node_dir=self.run / "node",
            root_dir=self.dirs.root,
            cni_conf_dir=self.cni.net_dir,
            cni_bin_dir=self.cni.bin_dir,
            cdi_dir=self.dirs.cdi,
            tools=self.bed.tools,
            env=self.cni.delegate_env(),
            mounts=NodeMounts(self.binds(), self.run / "node-mounts.log") if self.binds else None,
            product_images=self.product_images(),
            address=self.address,
        )
        self._node.start()

    def remove_stopped_sandboxes(self) -> None:
        """See ``RealNode.remove_stopped_sandboxes``; nothing before the node started."""
        if self._node is not None:
            self._node.remove_stopped_sandboxes()

    def runnable(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """Nothing can be pulled here: each container runs the locally built workload image (its
        /bin/bash runs the spec's command)."""
        out = copy.deepcopy(dict(pod))
        for container in out["spec"]["containers"]:
            container["image"] = self.node.workload_ref
            container["imagePullPolicy"] = "Never"
        return out

    def start_errors(self, pod_name: str) -> str:
        return self.node.log_tail(errors_only=True, mentioning=pod_name)

    def netns_path(self, pod_uid: str) -> str:
        runtime = self.node
        # The Pod's Running phase can show before containerd reports its sandbox ready (the
        # kubelet's status and the CRI's listing are separate reads), so wait for it.
        sandbox = wait_for(
            lambda: runtime.ready_sandbox(pod_uid),
            SANDBOX_READY_TIMEOUT,
            what=f"a ready sandbox for Pod UID {pod_uid}",
            ignore=(realnode.RealNodeError,),
        )
        path = runtime.netns_path(sandbox["id"])
        self._observe(sandbox, path)
        return path

    def _observe(self, sandbox: Mapping[str, Any], path: str) -> None:
        meta = sandbox.get("metadata") or {}
        self.observed[sandbox["id"]] = ObservedSandbox(
            str(meta.get("namespace", "")), str(meta.get("name", "")), path, sandbox["id"]
        )
        # The cluster network's eth0 is a veth: its peer's ifindex names the host end ptp made.
        out = subprocess.run(
            ["nsenter", f"--net={path}", "ip", "-j", "link", "show", "dev", "eth0"],
            capture_output=True,
            text=True,
            check=False,
        )
        with contextlib.suppress(ValueError, IndexError, KeyError):
            peer = int(json.loads(out.stdout)[0]["link_index"])
            host = json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True, text=True).stdout)
            self.observed_links.update(str(link["ifname"]) for link in host if link.get("ifindex") == peer)

    def prepare_calls(self) -> int:
        """The real kubelet logs each call at -v=4."""
        return self.node.rpc_calls("NodePrepareResources")

    def sandboxes_made(self) -> MadeSandboxes:
        return list(self.observed.values()), set(self.observed_links)

    def leftover_netns(self) -> list[str]:
        return [
            f"netns {sb.netns_path} (Pod {sb.namespace}/{sb.pod})"
            for sb in self.observed.values()
            if Path(sb.netns_path).exists()
        ]

    def leftover_host_links(self) -> list[str]:
        return [f"host link {name}" for name in sorted(self.observed_links) if host_link(name) is not None]

    def drain(self) -> None:
        with contextlib.suppress(WaitTimeout, ReasonedError):
            wait_for(
                lambda: not self._node or not self._node.running_sandboxes(),
                30,
                what="the kubelet to stop the remaining sandboxes",
            )

    def stop(self) -> list[str]:
        # What it had to clean up by force stays in RealNode.teardown_notes.
        if self._node is not None:
            self._node.stop()
        return []

    def sweep(self, cache_files: Sequence[str]) -> None:
        """Nothing: the real node's teardown removed every sandbox through the CRI."""

    def logs(self) -> str:
        if self._node is None:
            return ""
        return f"--- kubelet (errors) ---\n{self._node.log_tail(errors_only=True)}"


class SimKubelet:
    """The simulated kubelet (testbed/kubelet_sim.py): registers the driver over its real sockets
    and runs each Pod's sandbox network through cnitool, with no containers."""

    kind = SIM

    def __init__(
        self,
        bed: TestBed,
        *,
        node_name: str,
        dirs: KubeletDirs,
        cni: NodeCni,
        driver_output: Callable[[], str],
    ) -> None:
        self.bed, self.node_name, self.dirs, self.cni = bed, node_name, dirs, cni
        self.driver_output = driver_output
        self.plugin: FakeKubelet | None = None
        self.kubelet: SimulatedKubelet | None = None

    def start(self) -> None:
        try:
            registration = wait_for_socket(self.dirs.registry, "-reg.sock", 60)
        except TimeoutError:
            raise ReasonedError(
                "DriverNotRegistered",
                f"sriov-dra-driver never offered its registration socket: {self.driver_output()}",
            ) from None
        self.plugin = FakeKubelet(registration)
        self.plugin.register()
        cnitool = Cnitool(
            self.bed.tools.binary("cnitool", "cnitool"),
            self.cni.net_dir,
            self.cni.bin_dir,
            SHIM_NETWORK,
            self.cni.delegate_env(),
        )
        self.kubelet = SimulatedKubelet(
            self.bed.api_client, self.node_name, {keys.DOMAIN: self.plugin}, cnitool
        )
        self.kubelet.start()

    @property
    def running(self) -> SimulatedKubelet:
        assert self.kubelet is not None, "Stack.up() first"
        return self.kubelet

    def runnable(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """As it is: no container runs."""
        return copy.deepcopy(dict(pod))

    def start_errors(self, pod_name: str) -> str:
        return "; ".join(self.running.errors.values())

    def netns_path(self, pod_uid: str) -> str:
        return self.sandbox(pod_uid).sandbox.netns_path

    def sandbox(self, pod_uid: str) -> PodRecord:
        record = self.running.record(pod_uid)
        if record is None:
            raise ReasonedError("NoSandbox", f"the simulated kubelet holds no sandbox for Pod UID {pod_uid}")
        return record

    def prepare_calls(self) -> int:
        return self.running.prepare_calls

    def _made(self) -> tuple[list[Sandbox], set[str], set[str]]:
        # A stack whose start failed before this kubelet's made nothing.
        return self.kubelet.made() if self.kubelet is not None else ([], set(), set())

    def sandboxes_made(self) -> MadeSandboxes:
        created, links, _ = self._made()
        return created, links

    def leftover_netns(self) -> list[str]:
        """Network namespaces it made that still exist, and sandboxes it still holds."""
        created, _, held = self._made()
        present = set(netns.listnetns())
        return [
            f"netns {sb.netns} (Pod {sb.namespace}/{sb.pod}"
            + (", still held by the kubelet)" if sb.netns in held else ")")
            for sb in created
            if sb.netns in present or sb.netns in held
        ]

    def leftover_host_links(self) -> list[str]:
        links = self._made()[1]
        return [f"host link {name}" for name in sorted(links) if host_link(name) is not None]

    def drain(self) -> None:
        """Nothing: its sandboxes go with :meth:`stop`."""

    def stop(self) -> list[str]:
        left = []
        if self.kubelet is not None:
            self.kubelet.stop()
            # Before the CNI daemon and the driver stop: a sandbox still up needs both to go.
            left = self.kubelet.release_all()
        if self.plugin is not None:
            self.plugin.close()
        return left

    def sweep(self, cache_files: Sequence[str]) -> None:
        created, links, _ = self._made()
        for sandbox in created:
            subprocess.run(["ip", "netns", "del", sandbox.netns], check=False, capture_output=True)
        for name in links:
            subprocess.run(["ip", "link", "del", name], check=False, capture_output=True)
        for path in cache_files:
            Path(path).unlink(missing_ok=True)

    def logs(self) -> str:
        if self.kubelet is None or not self.kubelet.log:
            return ""
        return "--- kubelet-sim ---\n" + "\n".join(self.kubelet.log[-20:])
