"""One node of the end-to-end bed, composed of its components, on a running control plane.

Everything is real except the hardware: the fake SR-IOV node (testbed/fakenode.py), the node's
CNI (testbed/nodecni.py: ``cni-shim`` thick with ``cni-shim-daemon`` and live reads, or thin;
``plugins/sriov`` on the fake node's veth VFs with real whereabouts; ptp + host-local as the
cluster network), ``sriov-dra-driver`` with auto-attach (testbed/driver.py), the kubelet
(testbed/kubelets.py: the real one with containerd and runc, or, where that cannot run
(``realnode.unavailable_reason``), the simulated one; callers say so to the user), and the GPU
stand-in (testbed/gpu_plugin.py). ``Stack`` starts them in the order they depend on each other
and stops them in reverse, each step even when another failed; with ``second_node`` a second real
node runs as ``peer``. What runs on it is in testbed/scenario.py.

Used by ``scripts/demo.py`` (``make demo``), ``scripts/soak.py`` and ``tests/e2e``::

    with Stack(bed, thick=...) as stack:
        result = run_pairs(stack)          # apply, schedule, prepare, ADD, observe, check, tear down
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError
from testbed import bootstrap, realnode
from testbed.bed import TestBed
from testbed.cluster import Cluster
from testbed.deployment import DRIVER_NAMESPACE
from testbed.driver import Driver
from testbed.fake_kubelet import KubeletDirs
from testbed.fakenode import FakeNode, load_two_rail
from testbed.gpu_plugin import GpuStandIn
from testbed.installation import (
    DAEMONSETS,
    HELM,
    HELM_CHART,
    KUSTOMIZE,
    PROCESSES,
    Installation,
    ProductImage,
    build_images,
    node_binds,
)
from testbed.installed import InstalledDaemon, InstalledDriver
from testbed.kubelets import REAL, Kubelet, RealKubelet, SimKubelet
from testbed.nodeaddress import NodeAddress
from testbed.nodecni import NodeCni
from testbed.tools import ToolSet
from testbed.workloads import NODE_LABEL, WORKLOAD_NS

POD_SUBNET = "10.241.0.0/24"
# The second node's cluster network: host-local on each node leases from its own range, and ptp's
# host routes of both nodes share this machine's routing table, so the ranges must be disjoint.
SECOND_NODE_POD_SUBNET = "10.241.1.0/24"
SECOND_NODE_SUFFIX = "-b"


class Stack:
    """The fake node, the CNI, the driver, the kubelet and the GPU stand-in of one node, and the
    cluster as seen from it (``cluster``); ``Stack(...)`` then ``up()``/``down()``, or ``with``."""

    def __init__(
        self,
        bed: TestBed,
        *,
        thick: bool,
        kubelet: str = REAL,
        say: Callable[[str], None] = lambda s: None,
        second_node: bool = False,
        node_name: str | None = None,
        pod_subnet: str = POD_SUBNET,
        install: str = PROCESSES,
        primary: Stack | None = None,
        topology: Mapping[str, Any] | None = None,
    ) -> None:
        """``second_node``: also run a second real node (its own fake SR-IOV node, containerd,
        kubelet, driver and CNI daemon) as ``peer``, so the scheduler has two nodes; opt-in because
        it doubles the stack's start-up cost. ``node_name``/``pod_subnet`` are the peer's, and
        ``primary`` the stack whose peer it is.

        ``install``: ``processes`` runs the driver and the CNI daemon as host processes of the bed
        (the fast inner loop); ``daemonsets`` installs the product's images and ``deploy/`` and lets
        the real kubelet run them (testbed/installation.py), each node in its own mount namespace.

        ``topology``: the fake SR-IOV node's document (fixtures/topologies/); the two-rail node of
        spec 14.2 when None.
        """
        if (second_node or install != PROCESSES) and kubelet != REAL:
            raise ReasonedError(
                "NeedsRealKubelet", "a second node and the installed product run only on the real kubelet"
            )
        if install != PROCESSES and not thick:
            raise ReasonedError("InstalledIsThick", "the installed CNI DaemonSet runs thick")
        self.bed, self.thick, self.kubelet_kind, self.say = bed, thick, kubelet, say
        self.install, self.primary = install, primary
        self.installation: Installation | None = primary.installation if primary else None
        self.images: list[ProductImage] = primary.images if primary else []
        self.second_node = second_node
        self.topology = topology
        self.node_name = node_name or bed.node_name
        self.pod_subnet = pod_subnet
        self.peer: Stack | None = None
        self.run = Path(tempfile.mkdtemp(prefix="e2e", dir="/tmp"))
        root = self.run / "kubelet"
        dirs = KubeletDirs(root, root / "plugins_registry", root / "plugins", self.run / "cdi")
        self.node: FakeNode | None = None
        self.cni = NodeCni(
            bed, self.run, thick=thick, pod_subnet=pod_subnet, node=lambda: self.fake_node, say=say
        )
        self.kubelet: Kubelet = (
            RealKubelet(
                bed,
                node_name=self.node_name,
                run=self.run,
                dirs=dirs,
                cni=self.cni,
                binds=self._binds if self.installed else None,
                product_images=lambda: [image.archive for image in self.images],
                # Each installed node's probes listen on its own IP (the nodes share the host's
                # network namespace): the primary is node 0, its peer node 1.
                address=NodeAddress(0 if primary is None else 1) if self.installed else None,
            )
            if self.real
            else SimKubelet(
                bed, node_name=self.node_name, dirs=dirs, cni=self.cni, driver_output=self._driver_output
            )
        )
        self.cluster = Cluster(bed, self.kubelet)
        self.driver: Driver | InstalledDriver = (
            InstalledDriver(
                bed,
                self.cluster,
                node_name=self.node_name,
                dirs=dirs,
                installation=self._installation,
                runtime=lambda: self.node_runtime,
                say=say,
            )
            if self.installed
            else Driver(
                bed,
                self.cluster,
                node_name=self.node_name,
                run=self.run,
                dirs=dirs,
                node=lambda: self.fake_node,
                say=say,
                kubelet_log=self._kubelet_log if self.real else None,
            )
        )
        self.gpus = GpuStandIn(self.cluster, node_name=self.node_name, dirs=dirs, node=lambda: self.fake_node)
        self.timings: dict[str, float] = {}
        # What down() found this run's sandboxes left on the node (and then removed).
        self.left_behind: list[str] = []

    @property
    def real(self) -> bool:
        return self.kubelet_kind == REAL

    @property
    def host_driver(self) -> Driver:
        """The driver as a host process of the bed (a stack with ``install=processes``): what the
        lifecycle tests pause, crash and restart with other settings."""
        assert isinstance(self.driver, Driver), "a stack that runs the driver as a host process"
        return self.driver

    @property
    def installed(self) -> bool:
        return self.install in (DAEMONSETS, HELM_CHART)

    def _installation(self) -> Installation:
        assert self.installation is not None, "Stack.up() installs the product first"
        return self.installation

    def _binds(self) -> dict[Path, Path]:
        assert isinstance(self.kubelet, RealKubelet)
        return node_binds(
            kubelet_root=self.kubelet.dirs.root,
            cni_conf=self.cni.net_dir,
            cni_bin=self.cni.bin_dir,
            socket_dir=self.cni.socket_dir,
            shim_cache=self.cni.shim_cache,
            cdi=self.kubelet.dirs.cdi,
            devinfo=self.run / "devinfo",
            sysfs=self.fake_node.sysfs_root,
        )

    @property
    def node_runtime(self) -> realnode.RealNode:
        """containerd and the real kubelet (a stack on the real kubelet, after up())."""
        assert isinstance(self.kubelet, RealKubelet), "a Stack on the real kubelet"
        return self.kubelet.node

    @property
    def fake_node(self) -> FakeNode:
        assert self.node is not None, "Stack.up() first"
        return self.node

    def _driver_output(self) -> str:
        return self.driver.output()

    def _kubelet_log(self) -> str:
        return self.node_runtime.log_tail()

    @property
    def nodes(self) -> list[Stack]:
        """This node's stack and, with ``second_node``, the peer's."""
        return [self, *([self.peer] if self.peer is not None else [])]

    def on(self, node_name: str) -> Stack:
        """The stack of the node named ``node_name`` (a Pod's ``spec.nodeName``)."""
        for stack in self.nodes:
            if stack.node_name == node_name:
                return stack
        raise ReasonedError("UnknownNode", f"node {node_name!r} is not one of this stack's nodes")

    def label_nodes(self, on: bool) -> None:
        """Label (or unlabel) every node of the stack for the workloads' nodeSelector."""
        self.cluster.label_nodes([stack.node_name for stack in self.nodes], NODE_LABEL, on)

    # -- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> Stack:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> None:
        started = time.monotonic()
        topology = self.topology or load_two_rail()
        self.say(
            f"Creating the fake SR-IOV node ({len(topology['roots'])} PCIe roots, one rail PF and one GPU under each)..."
        )
        self.node = FakeNode.up(topology, self.run / "sys")
        # The installation creates its own namespaces (Helm refuses to adopt one that exists).
        for name in (WORKLOAD_NS,) if self.installed else (DRIVER_NAMESPACE, WORKLOAD_NS):
            self.bed.create_namespace(name, exist_ok=True)
        self.cni.install_whereabouts()
        self.cni.install(host_shim=not self.installed)
        if self.installed and self.primary is None:
            self.say("Building the product images (make images; cached by their inputs)...")
            self.images = build_images(say=self.say)
        if self.real:
            # Before the driver: the kubelet deletes its node's ResourceSlices each time it starts.
            self._start_real_node()
        if self.installed:
            self._install()
        self.driver.grant(self.node_runtime.workload_ref if self.real else None)
        if not self.installed:
            self.cni.grant()
        self.driver.start()
        if self.thick:
            self.cni.start_daemon()
        if self.real:
            self.driver.wait_registered()
            self.gpus.start_plugin(lambda: self.node_runtime.log_tail(errors_only=True))
        else:
            self.kubelet.start()
        if self.second_node:
            self._start_peer()
        self.timings["stack_up_s"] = round(time.monotonic() - started, 2)

    def _start_real_node(self) -> None:
        self.say("Starting containerd and the real kubelet (the bed's Node)...")
        self.kubelet.start()
        if self.node_name != self.bed.node_name:
            # The peer's kubelet registered its Node just now, tainted not-ready at admission.
            bootstrap.remove_taints(self.cluster.api, self.node_name)

    def _install(self) -> None:
        """The primary applies the installation; every node waits for its own Pods of it."""
        if self.installation is None:
            started = time.monotonic()
            self.installation = Installation(
                self.bed.api_client,
                kubeconfig=self.bed.kubeconfig,
                api_port=int(self.bed.server.rsplit(":", 1)[1]),
                tools=self.bed.tools,
                via=HELM if self.install == HELM_CHART else KUSTOMIZE,
                say=self.say,
                before_uninstall=self._remove_stopped_sandboxes,
            )
            self.installation.install()
            self.timings["install_apply_s"] = round(time.monotonic() - started, 2)
        started = time.monotonic()
        self.installation.wait_ready(self.node_name, lambda: self.node_runtime.log_tail(errors_only=True))
        self.cni.installed = InstalledDaemon(
            self._installation, self.node_name, lambda: self.node_runtime, self.cni.socket_dir
        )
        self.timings["install_ready_s"] = round(time.monotonic() - started, 2)

    def _uninstall(self) -> None:
        if self.installation is not None and self.primary is None:
            self.installation.uninstall()

    def _remove_stopped_sandboxes(self) -> None:
        for node in self.nodes:
            if isinstance(node.kubelet, RealKubelet):
                node.kubelet.remove_stopped_sandboxes()

    def _start_peer(self) -> None:
        self.say("Starting the second node (fake SR-IOV node, containerd, kubelet, driver, CNI)...")
        self.peer = Stack(
            self.bed,
            thick=self.thick,
            say=self.say,
            node_name=self.node_name + SECOND_NODE_SUFFIX,
            pod_subnet=SECOND_NODE_POD_SUBNET,
            install=self.install,
            primary=self,
            topology=self.topology,
        )
        self.peer.__enter__()

    def kill(self, component: str) -> None:
        """SIGKILL one of this node's processes (a crash: no cleanup of its own), then start it
        again and wait until it serves: the driver registered with the kubelet, the daemon
        accepting on its socket, the kubelet Ready."""
        if component == "kubelet":
            self.node_runtime.stop_kubelet(kill=True)
            self.node_runtime.start_kubelet()
        elif component == "driver":
            self.driver.kill()
        elif component == "daemon" and self.cni.installed is not None:
            self.cni.installed.pod.kill()
            self.cni.start_daemon()
        elif component == "daemon":
            daemon = self.cni.daemon
            assert daemon is not None, f"no {component} runs on {self.node_name}"
            daemon.proc.kill()
            daemon.proc.wait()
            self.cni.start_daemon()
        else:
            raise ReasonedError("UnknownComponent", f"{component!r} is not a driver, daemon or kubelet")

    def down(self) -> None:
        """Stop everything, dependents first; every step runs even when an earlier one failed, so a
        failed run leaves no process, netns, veth or directory behind either."""
        with contextlib.ExitStack() as steps:
            for step in reversed(
                (
                    # While every node's kubelet runs: it stops the DaemonSets' Pods on its node.
                    self._uninstall,
                    self._stop_peer,
                    self._stop_kubelet,
                    self.cni.stop_daemon,
                    self.driver.stop,
                    self.driver.revoke,
                    lambda: self.cluster.delete_slices(self.cluster.slices(self.node_name)),
                    self._sweep_sandboxes,
                    self._remove_node,
                    self._delete_node_object,
                    lambda: shutil.rmtree(self.run, ignore_errors=True),
                )
            ):
                steps.callback(step)

    def _stop_peer(self) -> None:
        # First: its kubelet restores the host sysctls it saw, which are this node's kubelet's.
        if self.peer is not None:
            peer, self.peer = self.peer, None
            peer.down()
            self.left_behind += [f"{peer.node_name}: {what}" for what in peer.left_behind]

    def _stop_kubelet(self) -> None:
        if self.real and self.driver.token is not None:
            # The anchor Pod runs on the real kubelet; let it stop it like any deleted Pod.
            self.driver.revoke()
            self.kubelet.drain()
        # While the driver and cni-shim-daemon still run: the kubelet stops leftover sandboxes
        # with a CNI DEL, which goes through them.
        self.left_behind += self.kubelet.stop()
        self.gpus.stop()

    def leftovers(self) -> list[str]:
        """What this run's sandboxes left on the node: netns, host veths, leases, cache files."""
        made, _ = self.kubelet.sandboxes_made()
        return [
            *self.kubelet.leftover_netns(),
            *self.kubelet.leftover_host_links(),
            *self.cni.host_local_leases(),
            *self.cni.cache_files({sb.container_id for sb in made}),
        ]

    def _sweep_sandboxes(self) -> None:
        """Record what this run's sandboxes left (the stack's last check reads it), then remove it."""
        found = self.leftovers()
        self.left_behind += found
        if found:
            made, _ = self.kubelet.sandboxes_made()
            self.kubelet.sweep(self.cni.cache_files({sb.container_id for sb in made}))

    def _remove_node(self) -> None:
        if self.node is not None:
            self.node.down()

    def _delete_node_object(self) -> None:
        # The peer's kubelet registered its Node; the bed's own Node outlives every stack.
        if self.node_name != self.bed.node_name:
            with contextlib.suppress(ApiException):
                self.cluster.core.delete_node(self.node_name)

    def logs(self) -> str:
        parts = [self.driver.logs(), *self.cni.logs(), self.kubelet.logs()]
        return "\n".join(part for part in parts if part)


class Stacks:
    """One stack at a time: two drivers or two kubelets on the same node would fight over it."""

    def __init__(self, bed: TestBed, tools: ToolSet) -> None:
        self.bed, self.tools = bed, tools
        self.current: Stack | None = None

    def get(
        self,
        *,
        thick: bool,
        kubelet: str = REAL,
        second_node: bool = False,
        install: str = PROCESSES,
        topology: Mapping[str, Any] | None = None,
    ) -> Stack:
        for component in ("plugins", "whereabouts", "cnitool"):
            self.tools.require(component)
        if kubelet == REAL:
            for component in realnode.NODE_COMPONENTS:
                self.tools.require(component)
        current = self.current
        wanted = (thick, kubelet, second_node, install, topology)
        if (
            current is not None
            and (current.thick, current.kubelet_kind, current.second_node, current.install, current.topology)
            != wanted
        ):
            self.close()
        if self.current is None:
            stack = Stack(
                self.bed,
                thick=thick,
                kubelet=kubelet,
                second_node=second_node,
                install=install,
                topology=topology,
            )
            stack.__enter__()
            self.current = stack
        return self.current

    def close(self) -> None:
        if self.current is not None:
            stack, self.current = self.current, None
            stack.down()
            if stack.left_behind:
                raise ReasonedError("SandboxesLeftBehind", "; ".join(stack.left_behind))
