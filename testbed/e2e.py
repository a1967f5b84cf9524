"""The product's main job end to end (spec 14.2, 14.4, 16.2): two GPU/NIC pairs on one node.

Everything is real except the hardware: the bed's API server, controller-manager and scheduler,
the real kubelet with containerd and runc (testbed/realnode.py), ``sriov-dra-driver`` with
auto-attach registered through the kubelet's plugin registry over its real unix sockets,
``cni-shim`` installed as the node's CNI (thick, with ``cni-shim-daemon`` and live reads, or thin),
``plugins/sriov`` on the fake node's veth VFs with real whereabouts, and ptp + host-local as the
cluster network. Where the real kubelet cannot run (``realnode.unavailable_reason``), a Stack can
be built on the simulated kubelet instead (``kubelet=SIM``); callers say so to the user.

Used by ``scripts/demo.py`` (``make demo``) and ``tests/e2e``::

    with Stack(bed, thick=...) as stack:
        result = run_pairs(stack)          # apply, schedule, prepare, ADD, observe, check, tear down
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import netaddr
import yaml
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException
from pyroute2 import netns

from cni_shim import launcher
from plugins.sriov import state as sriov_state
from sriov_contract import keys
from sriov_contract.errors import ReasonedError
from testbed import bootstrap, processes, realnode
from testbed.apiobjects import as_object, items_of
from testbed.bed import TestBed
from testbed.bound_token import BoundToken, node_bound_kubeconfig
from testbed.fake_kubelet import FakeKubelet, wait_for_socket
from testbed.fakenode import FakeNode, load_two_rail
from testbed.gpu_plugin import GPU_DRIVER, GpuPlugin, gpu_slice
from testbed.kubelet_sim import Cnitool, PodRecord, Sandbox, SimulatedKubelet
from testbed.netlinks import host_link, ipv4_addresses, ns_links
from testbed.nodecni import WHEREABOUTS_CRDS, make_cni_bin_dir, ptp_host_local
from testbed.sriov_topology import VfRecord
from testbed.tools import ToolSet
from testbed.waiting import WaitTimeout, wait_for

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "docs" / "examples"
DRIVER = keys.DOMAIN
POLICY_NS = "dra-driver-sriov"  # where deploy/ puts the driver, its ServiceAccount and its policies
DRIVER_SERVICE_ACCOUNT = "sriov-dra-driver"
WORKLOAD_NS = "ai-workloads"
NODE_LABEL = "networking.example.com/dual-rail"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NAD_API = ("k8s.cni.cncf.io", "v1", "network-attachment-definitions")
WHEREABOUTS_API = ("whereabouts.cni.cncf.io", "v1alpha1")
SHIM_NETWORK = "multus-cni-network"
POD_SUBNET = "10.241.0.0/24"
# The second node's cluster network: host-local on each node leases from its own range, and ptp's
# host routes of both nodes share this machine's routing table, so the ranges must be disjoint.
SECOND_NODE_POD_SUBNET = "10.241.1.0/24"
SECOND_NODE_SUFFIX = "-b"
BIN = Path(sys.executable).parent
POD_START_TIMEOUT = 120.0
CLEANUP_TIMEOUT = 90.0
NETNS_SETTLE_TIMEOUT = 10.0  # the kernel destroys a removed netns, and the veths in it, asynchronously
# Where cnitool's libcni caches each attachment's result (libcni's default; cnitool sets no other).
LIBCNI_CACHE_DIR = Path("/var/lib/cni")

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
REAL, SIM = "real", "sim"  # which kubelet a Stack runs
REGISTERED = "kubelet registered the plugin"  # the driver's log line (sriov_dra.app.wiring)


# How long a Running Pod's sandbox may take to show as ready in the CRI's listing.
SANDBOX_READY_TIMEOUT = 30.0

# -- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    request: str
    gpu: str
    vf_pci: str
    pcie_root: str
    rail: str
    source_nad: str
    shadow_nad: str
    interface: str
    ip: str


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str = ""


def check(name: str, ok: bool, detail: str = "") -> Check:
    return Check(name, PASS if ok else FAIL, detail)


@dataclass
class Result:
    scenario: str
    cni_mode: str
    kubelet: str = REAL
    rows: list[Row] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    after_teardown: list[Check] = field(default_factory=list)
    after_stop: list[Check] = field(default_factory=list)  # after the whole stack went down
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in [*self.checks, *self.after_teardown, *self.after_stop])

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


COLUMNS = ("request", "GPU", "VF PCI", "pcieRoot", "rail", "source NAD", "shadow NAD", "interface", "IP")


def render_table(rows: Sequence[Row]) -> str:
    cells = [COLUMNS, *(tuple(str(v) for v in asdict(r).values()) for r in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_checks(checks: Sequence[Check]) -> str:
    return "\n".join(
        f"  {c.status:<4}  {c.name}" + (f"\n        {c.detail}" if c.detail else "") for c in checks
    )


# -- manifests ------------------------------------------------------------------------------------


def load_examples(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def find(docs: Sequence[Mapping[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    for doc in docs:
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name):
            return dict(doc)
    raise ReasonedError("ExampleMissing", f"docs/examples has no {kind} {name or ''}; restore the example")


def substitute(
    docs: Sequence[Mapping[str, Any]], pf_names: Mapping[str, str], ipam: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The spec's only allowed edits: real PF names, and where whereabouts finds its datastore."""
    out = []
    for original in docs:
        doc = copy.deepcopy(dict(original))
        if doc["kind"] == "SriovResourcePolicy":
            for config in doc["spec"]["configs"]:
                for selector in config.get("resourceFilters") or []:
                    selector["pfNames"] = [pf_names.get(n, n) for n in selector.get("pfNames") or []]
        if doc["kind"] == "NetworkAttachmentDefinition":
            config = json.loads(doc["spec"]["config"])
            if (config.get("ipam") or {}).get("type") == "whereabouts":
                config["ipam"].update(ipam)
            doc["spec"]["config"] = json.dumps(config, indent=2)
        out.append(doc)
    return out


@dataclass(frozen=True)
class Workload:
    """Administrator objects plus the workload Pod, and what the node must advertise first."""

    name: str
    admin: tuple[dict[str, Any], ...]
    workload: tuple[dict[str, Any], ...]
    pod: dict[str, Any]
    advertised: frozenset[str]  # VF PCI addresses the driver must publish before the Pod starts

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    def objects(self) -> list[dict[str, Any]]:
        return [*self.admin, *self.workload]


def pairs_workload(node: FakeNode, ipam: Mapping[str, Any]) -> Workload:
    """Spec 14.2 exactly as docs/examples has it, with the physical substitutions."""
    docs = substitute(load_examples("multus-auto-gpu-nic-pairs.yaml"), pf_renames(node), ipam)
    workload_kinds = ("DeviceClass", "ResourceClaimTemplate")
    return Workload(
        "gpu-nic-pairs",
        admin=tuple(d for d in docs if d["kind"] not in (*workload_kinds, "Pod")),
        workload=tuple(d for d in docs if d["kind"] in workload_kinds),
        pod=find(docs, "Pod"),
        advertised=frozenset(vf.pci for vf in node.vfs),
    )


def one_network_workload(node: FakeNode, ipam: Mapping[str, Any]) -> Workload:
    """Spec 14.1: one NAD named once in a DeviceClass; a Pod like 14.2's using its template."""
    pairs = load_examples("multus-auto-gpu-nic-pairs.yaml")
    one = load_examples("one-network-deviceclass.yaml")
    source = [d for d in pairs if d["kind"] == "Namespace"] + [
        find(pairs, "NetworkAttachmentDefinition", "rail-a-net")
    ]
    docs = substitute([*source, *one], pf_renames(node), ipam)
    pod = copy.deepcopy(find(pairs, "Pod"))
    pod["metadata"]["name"] = "one-network-demo"
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": "one-network-vf"}]
    policy = find(docs, "SriovResourcePolicy")
    pfs = set(policy["spec"]["configs"][0]["resourceFilters"][0]["pfNames"])
    return Workload(
        "one-network",
        # Here the administrator's DeviceClass names the NAD once; the workload is the template.
        admin=tuple(d for d in docs if d["kind"] != "ResourceClaimTemplate"),
        workload=tuple(d for d in docs if d["kind"] == "ResourceClaimTemplate"),
        pod=pod,
        advertised=frozenset(vf.pci for vf in node.vfs if vf.pf in pfs),
    )


def second_pod(pairs: Workload) -> tuple[dict[str, Any], dict[str, Any]]:
    """Another Pod on the same node with one VF on each rail (both GPUs are taken by the first)."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "nic-per-root", "namespace": pairs.namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": n, "exactly": {"deviceClassName": "sriov-pcie-netdevice", "count": 1}}
                        for n in ("nic-0", "nic-1")
                    ],
                    "constraints": [{"requests": ["nic-0", "nic-1"], "distinctAttribute": PCIE_ROOT}],
                }
            }
        },
    }
    pod = copy.deepcopy(pairs.pod)
    pod["metadata"]["name"] = "second-pod"
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": "nic-per-root"}]
    return template, pod


def rails_workload(stack: Stack, name: str = "rails") -> Workload:
    """Pods with one VF on each rail (distinct PCIe roots, no GPU) on any node of the stack: spec
    14.2's administrator objects, each policy naming the PFs of every node (the fake nodes' run
    prefixes make their names differ), and the VF-only template of :func:`second_pod`."""
    pairs = pairs_workload(stack.fake_node, stack.whereabouts_ipam())
    template, pod = second_pod(pairs)
    admin = copy.deepcopy(list(pairs.admin))
    for doc in admin:
        if doc["kind"] != "SriovResourcePolicy":
            continue
        for config in doc["spec"]["configs"]:
            for selector in config.get("resourceFilters") or []:
                selector["pfNames"] = [
                    node.fake_node.prefix + pf.removeprefix(stack.fake_node.prefix)
                    for pf in selector["pfNames"]
                    for node in stack.nodes
                ]
    pod["metadata"]["name"] = name
    # Its PID 1 ignores SIGTERM: a deletion would otherwise wait out the example's 5 s grace.
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    return Workload(
        name,
        admin=tuple(admin),
        workload=(find(pairs.workload, "DeviceClass", "sriov-pcie-netdevice"), template),
        pod=pod,
        advertised=pairs.advertised,
    )


def pf_renames(node: FakeNode) -> dict[str, str]:
    return {pf.netdev.removeprefix(node.prefix): pf.netdev for pf in node.pfs}


# -- the stack ------------------------------------------------------------------------------------


def rbac_rules(path: Path, kind: str) -> list[dict[str, Any]]:
    return [
        rule for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == kind for rule in d["rules"]
    ]


class Process:
    """One long-running product process with its log file."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], log: Path) -> None:
        self.log = log
        with log.open("ab") as out:
            # Like the bed's own processes: an interrupted demo or test session leaves none behind.
            self.proc = subprocess.Popen(
                processes.dying_with_parent(argv),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """SIGSTOP for the block, SIGCONT after it (if it still runs): whatever asks it something
        meanwhile waits, which is how a test holds a caller inside a call without racing it."""
        self.proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            if self.alive():
                self.proc.send_signal(signal.SIGCONT)

    def output(self, tail: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-tail:]

    def stop(self) -> None:
        processes.terminate(self.proc, 20)


class Stack:
    """Fake node, RBAC, whereabouts, CNI config, driver, (daemon) and kubelet for one bed."""

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
    ) -> None:
        """``second_node``: also run a second real node (its own fake SR-IOV node, containerd,
        kubelet, driver and CNI daemon) as ``peer``, so the scheduler has two nodes; opt-in because
        it doubles the stack's start-up cost. ``node_name``/``pod_subnet`` are the peer's."""
        if second_node and kubelet != REAL:
            raise ReasonedError("SecondNodeNeedsRealKubelet", "a second node runs only on the real kubelet")
        self.bed = bed
        self.thick = thick
        self.kubelet_kind = kubelet
        self.say = say
        self.second_node = second_node
        self.node_name = node_name or bed.node_name
        self.pod_subnet = pod_subnet
        self.peer: Stack | None = None
        self.api = bed.api_client
        self.core = client.CoreV1Api(self.api)
        self.objects = client.CustomObjectsApi(self.api)
        self.dyn = dynamic.DynamicClient(self.api)
        self.run = Path(tempfile.mkdtemp(prefix="e2e", dir="/tmp"))
        self.node: FakeNode | None = None
        self.driver: Process | None = None
        self.driver_token: BoundToken | None = None
        self.daemon: Process | None = None
        self.kubelet: SimulatedKubelet | None = None
        self.plugin: FakeKubelet | None = None
        self.real_node: realnode.RealNode | None = None
        # The real kubelet's sandboxes as the run observed them (sandbox ID -> record), and the
        # host veths their CNI ADDs reported: the teardown checks' "made by this run".
        self.observed: dict[str, ObservedSandbox] = {}
        self.observed_links: set[str] = set()
        self.gpu_plugin: GpuPlugin | None = None
        self.node_notes: list[str] = []  # what the real node's teardown had to clean up by force
        self.timings: dict[str, float] = {}
        # What down() found this run's sandboxes left on the node (and then removed).
        self.left_behind: list[str] = []

    # paths
    @property
    def plugins_dir(self) -> Path:
        return self.run / "kubelet" / "plugins"

    @property
    def registry_dir(self) -> Path:
        return self.run / "kubelet" / "plugins_registry"

    @property
    def checkpoint(self) -> Path:
        return self.plugins_dir / DRIVER / "checkpoint.json"

    @property
    def bin_dir(self) -> Path:
        return self.run / "bin"

    @property
    def net_dir(self) -> Path:
        return self.run / "net.d"

    @property
    def real(self) -> bool:
        return self.kubelet_kind == REAL

    @property
    def node_runtime(self) -> realnode.RealNode:
        assert self.real_node is not None, "a Stack on the real kubelet, after up()"
        return self.real_node

    @property
    def fake_node(self) -> FakeNode:
        assert self.node is not None, "Stack.up() first"
        return self.node

    def whereabouts_ipam(self) -> dict[str, Any]:
        return {
            "configuration_path": str(self.run / "whereabouts.conf"),
            "kubernetes": {"kubeconfig": str(self.bed.kubeconfig)},
        }

    # lifecycle
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
        self.say("Creating the fake SR-IOV node (two PCIe roots, one rail PF and one GPU under each)...")
        self.node = FakeNode.up(load_two_rail(), self.run / "sys")
        self._namespaces()
        self._whereabouts()
        self._cni()
        if self.real:
            # Before the driver: the kubelet deletes its node's ResourceSlices each time it starts.
            self._start_real_node()
        self._grant()
        self._start_driver()
        if self.thick:
            self._start_daemon()
        if self.real:
            self._wait_registered()
            self._start_gpu_plugin()
        else:
            self._start_kubelet()
        if self.second_node:
            self.say("Starting the second node (fake SR-IOV node, containerd, kubelet, driver, CNI)...")
            self.peer = Stack(
                self.bed,
                thick=self.thick,
                say=self.say,
                node_name=self.node_name + SECOND_NODE_SUFFIX,
                pod_subnet=SECOND_NODE_POD_SUBNET,
            )
            self.peer.__enter__()
        self.timings["stack_up_s"] = round(time.monotonic() - started, 2)

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

    def _namespaces(self) -> None:
        for name in (POLICY_NS, WORKLOAD_NS):
            self.bed.create_namespace(name, exist_ok=True)

    def _grant(self) -> None:
        """Exactly the deployed RBAC (deploy/*-rbac.yaml). The driver runs as its ServiceAccount
        with a token bound to a Pod on the node, as in its DaemonSet, because the API server lets
        only such a token write ResourceClaim status.devices; the CNI side uses a client-cert user."""
        self.bed.apply(yaml.safe_load_all((REPO / "deploy/driver-rbac.yaml").read_text()))
        self.driver_token = node_bound_kubeconfig(
            self.bed,
            POLICY_NS,
            DRIVER_SERVICE_ACCOUNT,
            self.run / "driver-kubeconfig.json",
            # The real kubelet runs the anchor Pod, as it would the driver's DaemonSet Pod.
            image=self.node_runtime.workload_ref if self.real else None,
            node_name=self.node_name,
        )
        self.bed.grant(self.bed.user_of("cni"), rbac_rules(REPO / "deploy/cni-rbac.yaml", "ClusterRole"))

    def _whereabouts(self) -> None:
        # The release's crds/ also holds its DaemonSet; install only the two CRDs the CNI uses.
        crds = self.run / "whereabouts-crds"
        crds.mkdir()
        for name in WHEREABOUTS_CRDS:
            shutil.copy(self.bed.tool_dir("whereabouts") / "crds" / name, crds / name)
        bootstrap.install_crds(self.api, crds)
        (self.run / "whereabouts.conf").write_text(
            json.dumps({"datastore": "kubernetes", "kubernetes": {"kubeconfig": str(self.bed.kubeconfig)}})
        )

    def _cni(self) -> None:
        """The node's CNI: cni-shim first in the conf dir, ptp + host-local as the cluster network."""
        make_cni_bin_dir(self.bin_dir, self.bed.tools)
        launcher.install(self.bin_dir / "cni-shim")
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
        common = {
            "cniDir": str(self.run / "shim-cache"),
            "binDir": str(self.bin_dir),
            "confDir": str(self.run / "multus.d"),
            "liveNetworkConfigOnAdd": True,
            "logFile": str(self.run / "cni-shim.log"),
            "logLevel": "verbose",
        }
        shim: dict[str, Any] = {
            "cniVersion": "1.0.0",
            "name": SHIM_NETWORK,
            "type": "cni-shim",
            "clusterNetwork": str(podnet),
        }
        if self.thick:
            shim["daemonSocketDir"] = str(self.run / "sock")
            daemon = {
                "cniVersion": "1.0.0",
                "socketDir": str(self.run / "sock"),
                "kubeconfig": str(self.bed.kubeconfig_for("cni")),
                "logToStderr": True,
                **common,
            }
            (self.run / "daemon-config.json").write_text(json.dumps(daemon, indent=2))
        else:
            shim.update(common, kubeconfig=str(self.bed.kubeconfig_for("cni")))
        (self.net_dir / "00-auto-sriov.conf").write_text(json.dumps(shim, indent=2))

    def delegate_env(self) -> dict[str, str]:
        return {**self.fake_node.env(), "SRIOV_CNI_DATA_DIR": str(self.run / "sriov-data")}

    def _start_driver(self, extra_env: Mapping[str, str] | None = None) -> None:
        self.say("Starting sriov-dra-driver (MULTUS mode, auto-attach)")
        assert self.driver_token is not None, "the driver's RBAC and token come first"
        for d in (self.plugins_dir, self.registry_dir, self.run / "cdi"):
            d.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "NODE_NAME": self.node_name,
            "NAMESPACE": POLICY_NS,
            "CDI_ROOT": str(self.run / "cdi"),
            "KUBELET_REGISTRAR_DIRECTORY_PATH": str(self.registry_dir),
            "KUBELET_PLUGINS_DIRECTORY_PATH": str(self.plugins_dir),
            "SYSFS_ROOT": str(self.fake_node.sysfs_root),
            "KUBECONFIG": str(self.driver_token.kubeconfig),
            "CONFIGURATION_MODE": "MULTUS",
            "MULTUS_AUTO_ATTACH": "true",
            **(extra_env or {}),
        }
        self.driver = Process([str(BIN / "sriov-dra-driver")], env, self.run / "driver.log")

    def _start_daemon(self) -> None:
        self.say("Starting cni-shim-daemon (thick mode, live reads on ADD)")
        sock = self.run / "sock"
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
            # Accepting, not merely present: a killed daemon leaves its socket file behind.
            return sock.is_dir() and any(p.is_socket() and _accepts(p) for p in sock.iterdir())

        wait_for(listening, 30, what=f"cni-shim-daemon to listen in {sock}")

    def kill(self, component: str) -> None:
        """SIGKILL one of this node's processes (a crash: no cleanup of its own), then start it
        again and wait until it serves: the driver registered with the kubelet, the daemon
        accepting on its socket, the kubelet Ready."""
        if component == "kubelet":
            self.node_runtime.stop_kubelet(kill=True)
            self.node_runtime.start_kubelet()
            return
        proc = {"driver": self.driver, "daemon": self.daemon}[component]
        assert proc is not None, f"no {component} runs on {self.node_name}"
        proc.proc.kill()
        proc.proc.wait()
        if component == "driver":
            self.restart_driver()
        else:
            self._start_daemon()

    def _start_real_node(self) -> None:
        self.say("Starting containerd and the real kubelet (the bed's Node)...")
        self.real_node = realnode.RealNode(
            api=self.api,
            node_name=self.node_name,
            kubeconfig=self.bed.kubeconfig,
            ca_file=self.bed.ca_file,
            node_dir=self.run / "node",
            root_dir=self.run / "kubelet",
            cni_conf_dir=self.net_dir,
            cni_bin_dir=self.bin_dir,
            cdi_dir=self.run / "cdi",
            tools=self.bed.tools,
            env=self.delegate_env(),
        )
        self.real_node.start()
        if self.node_name != self.bed.node_name:
            # The peer's kubelet registered its Node just now, tainted not-ready at admission.
            bootstrap.remove_taints(self.api, self.node_name)

    def restart_driver(self, extra_env: Mapping[str, str] | None = None) -> None:
        """Stop the driver (if it still runs) and start it again, e.g. with a crash point set
        (SRIOV_DRA_CRASH_AT); on the real kubelet, wait until the kubelet registered it again."""
        if self.driver is not None:
            self.driver.stop()
        before = self._registrations()
        self._start_driver(extra_env)
        if self.real:
            self._wait_registered(before)

    def _registrations(self) -> int:
        # The driver's log is appended to across restarts: count, do not just look.
        return self.driver.output(10_000_000).count(REGISTERED) if self.driver is not None else 0

    def _wait_registered(self, before: int = 0) -> None:
        driver = self.driver
        assert driver is not None

        def registered() -> bool:
            if not driver.alive():
                raise ReasonedError("DriverExited", f"sriov-dra-driver exited: {driver.output()}")
            return self._registrations() > before

        try:
            wait_for(registered, 60, what="the kubelet to register sriov-dra-driver's plugin")
        except WaitTimeout as exc:
            raise ReasonedError(
                "DriverNotRegistered",
                f"{exc.message}: {driver.output()}\n--- kubelet ---\n{self.node_runtime.log_tail()}",
            ) from None

    def _start_gpu_plugin(self) -> None:
        # The real kubelet prepares every driver of a claim: the GPU driver needs a plugin too.
        self.gpu_plugin = GpuPlugin(self.api, self.registry_dir, self.plugins_dir)
        if not self.gpu_plugin.registered.wait(30):
            raise ReasonedError(
                "GpuPluginNotRegistered",
                f"the kubelet did not register the {GPU_DRIVER} stand-in plugin: "
                f"{self.node_runtime.log_tail(errors_only=True)}",
            )

    def _start_kubelet(self) -> None:
        assert self.driver is not None
        try:
            registration = wait_for_socket(self.registry_dir, "-reg.sock", 60)
        except TimeoutError:
            raise ReasonedError(
                "DriverNotRegistered",
                f"sriov-dra-driver never offered its registration socket: {self.driver.output()}",
            ) from None
        self.plugin = FakeKubelet(registration)
        self.plugin.register()
        cnitool = Cnitool(
            self.bed.tools.binary("cnitool", "cnitool"),
            self.net_dir,
            self.bin_dir,
            SHIM_NETWORK,
            self.delegate_env(),
        )
        self.kubelet = SimulatedKubelet(self.api, self.node_name, {DRIVER: self.plugin}, cnitool)
        self.kubelet.start()

    def down(self) -> None:
        """Stop everything, dependents first; every step runs even when an earlier one failed, so a
        failed run leaves no process, netns, veth or directory behind either."""
        with contextlib.ExitStack() as steps:
            for step in reversed(
                (
                    self._stop_peer,
                    self._stop_kubelet,
                    self._stop_processes,
                    self._revoke_token,
                    self._delete_slices,
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

    def _delete_node_object(self) -> None:
        # The peer's kubelet registered its Node; the bed's own Node outlives every stack.
        if self.node_name != self.bed.node_name:
            with contextlib.suppress(ApiException):
                self.core.delete_node(self.node_name)

    def _stop_kubelet(self) -> None:
        if self.real_node is not None:
            if self.driver_token is not None:
                # The anchor Pod runs on the real kubelet; let it stop it like any deleted Pod.
                self.driver_token.revoke(self.bed)
                with contextlib.suppress(WaitTimeout, ReasonedError):
                    wait_for(
                        lambda: not self.real_node or not self.real_node.running_sandboxes(),
                        30,
                        what="the kubelet to stop the remaining sandboxes",
                    )
            # While the driver and cni-shim-daemon still run: the CRI stops leftover sandboxes
            # with a CNI DEL, which goes through them.
            self.node_notes = self.real_node.stop()
        if self.gpu_plugin is not None:
            self.gpu_plugin.stop()
        if self.kubelet is not None:
            self.kubelet.stop()
            # Before the CNI daemon and the driver stop: a sandbox still up needs both to go.
            self.left_behind += self.kubelet.release_all()
        if self.plugin is not None:
            self.plugin.close()

    def _stop_processes(self) -> None:
        for proc in (self.daemon, self.driver):
            if proc is not None:
                proc.stop()

    def _revoke_token(self) -> None:
        if self.driver_token is not None:
            self.driver_token.revoke(self.bed)

    def _delete_slices(self) -> None:
        # Slices outlive the driver (the Node owns them); leave the node as we found it.
        for item in self.list_objects(
            "resource.k8s.io", "v1", "resourceslices", field_selector=f"spec.nodeName={self.node_name}"
        ):
            with contextlib.suppress(ApiException):
                self.objects.delete_cluster_custom_object(
                    "resource.k8s.io", "v1", "resourceslices", item["metadata"]["name"]
                )

    def _sweep_sandboxes(self) -> None:
        """Record what this run's sandboxes left (the stack's last check reads it), then remove it."""
        found = self.sandbox_leftovers()
        self.left_behind += found
        if not found or self.kubelet is None:
            return
        created, links, _ = self.kubelet.made()
        for sandbox in created:
            subprocess.run(["ip", "netns", "del", sandbox.netns], check=False, capture_output=True)
        for name in links:
            subprocess.run(["ip", "link", "del", name], check=False, capture_output=True)
        for path in self.cni_cache_files():
            Path(path).unlink(missing_ok=True)

    def _remove_node(self) -> None:
        if self.node is not None:
            self.node.down()

    def logs(self) -> str:
        parts = []
        for name, proc in (("driver", self.driver), ("cni-shim-daemon", self.daemon)):
            if proc is not None:
                parts.append(f"--- {name} ({proc.log}) ---\n{proc.output()}")
        shim_log = self.run / "cni-shim.log"
        if shim_log.exists():
            parts.append(f"--- cni-shim ---\n{shim_log.read_text(errors='replace')[-4000:]}")
        if self.kubelet is not None and self.kubelet.log:
            parts.append("--- kubelet-sim ---\n" + "\n".join(self.kubelet.log[-20:]))
        if self.real_node is not None:
            parts.append(f"--- kubelet (errors) ---\n{self.real_node.log_tail(errors_only=True)}")
        return "\n".join(parts)

    # -- applying and removing objects ------------------------------------------------------------

    def list_objects(
        self, group: str, version: str, plural: str, *, namespace: str | None = None, **query: Any
    ) -> list[dict[str, Any]]:
        if namespace is None:
            return items_of(self.objects.list_cluster_custom_object(group, version, plural, **query))
        return items_of(
            self.objects.list_namespaced_custom_object(group, version, namespace, plural, **query)
        )

    def get_object(
        self, group: str, version: str, plural: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        if namespace is None:
            return as_object(self.objects.get_cluster_custom_object(group, version, plural, name))
        return as_object(self.objects.get_namespaced_custom_object(group, version, namespace, plural, name))

    def apply(self, docs: Sequence[Mapping[str, Any]]) -> None:
        self.bed.apply(docs)

    def delete(self, docs: Sequence[Mapping[str, Any]]) -> None:
        for doc in reversed(docs):
            if doc["kind"] == "Namespace":
                continue  # shared with whatever else lives there
            resource = self.dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            with contextlib.suppress(ApiException):
                resource.delete(name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"))

    def label_node(self, on: bool) -> None:
        """Label (or unlabel) every node of the stack for the workloads' nodeSelector."""
        escaped = NODE_LABEL.replace("~", "~0").replace("/", "~1")
        for name in (stack.node_name for stack in self.nodes):
            if on:
                self.core.patch_node(name, {"metadata": {"labels": {NODE_LABEL: "true"}}})
            else:
                with contextlib.suppress(ApiException):
                    self.core.patch_node(name, [{"op": "remove", "path": f"/metadata/labels/{escaped}"}])

    def published(self) -> dict[str, dict[str, Any]]:
        """Our driver's advertised devices on this node: device name -> attributes."""
        slices = self.list_objects(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            field_selector=f"spec.nodeName={self.node_name},spec.driver={DRIVER}",
        )
        return {d["name"]: d.get("attributes") or {} for s in slices for d in s["spec"].get("devices") or []}

    def wait_advertised(self, pcis: frozenset[str]) -> None:
        def ready() -> bool:
            got = {
                str(a.get("resource.kubernetes.io/pciBusID", {}).get("string"))
                for a in self.published().values()
            }
            return got == set(pcis)

        wait_for(ready, 60, what=f"the driver to advertise exactly {sorted(pcis)}")

    # -- Pods -------------------------------------------------------------------------------------

    def runnable(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """The Pod as this node can run it: nothing can be pulled here, so on the real kubelet each
        container runs the locally built workload image (its /bin/bash runs the spec's command)."""
        out = copy.deepcopy(dict(pod))
        if self.real:
            for container in out["spec"]["containers"]:
                container["image"] = self.node_runtime.workload_ref
                container["imagePullPolicy"] = "Never"
        return out

    def create_pod(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        created = self.core.create_namespaced_pod(
            pod["metadata"]["namespace"], client.V1Pod.model_validate(self.runnable(pod))
        )
        out: dict[str, Any] = self.api.sanitize_for_serialization(created)
        return out

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            pod: dict[str, Any] = self.api.sanitize_for_serialization(
                self.core.read_namespaced_pod(name, namespace)
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return pod

    def wait_running(self, namespace: str, name: str, timeout: float = POD_START_TIMEOUT) -> dict[str, Any]:

        def running() -> dict[str, Any] | None:
            pod = self.read_pod(namespace, name)
            return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None

        try:
            return wait_for(running, timeout, what=f"Pod {namespace}/{name} Running", interval=0.2)
        except WaitTimeout as exc:
            pod = self.read_pod(namespace, name) or {}
            conditions = [
                (c["type"], c.get("reason"), c.get("message"))
                for c in (pod.get("status") or {}).get("conditions") or []
            ]
            if self.kubelet is not None:
                errors = "; ".join(self.kubelet.errors.values())
            else:
                errors = self.node_runtime.log_tail(errors_only=True, mentioning=name)
            raise ReasonedError(
                "PodNotRunning",
                f"{exc.message}; conditions {conditions}; kubelet: {errors or 'no error recorded'}",
            ) from None

    def delete_pod(self, namespace: str, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.core.delete_namespaced_pod(name, namespace)
        wait_for(
            lambda: self.read_pod(namespace, name) is None,
            CLEANUP_TIMEOUT,
            what=f"Pod {namespace}/{name} gone",
            interval=0.2,
        )

    def netns_path(self, pod_uid: str) -> str:
        """The network namespace of the Pod's current sandbox."""
        if self.real:
            runtime = self.node_runtime
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
        return self.sandbox(pod_uid).sandbox.netns_path

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
        """NodePrepareResources calls the kubelet made so far (the real one logs each at -v=4)."""
        if self.real:
            return self.node_runtime.rpc_calls("NodePrepareResources")
        assert self.kubelet is not None
        return self.kubelet.prepare_calls

    def sandbox(self, pod_uid: str) -> PodRecord:
        assert self.kubelet is not None
        record = self.kubelet.record(pod_uid)
        if record is None:
            raise ReasonedError("NoSandbox", f"the simulated kubelet holds no sandbox for Pod UID {pod_uid}")
        return record

    def shadows(self, namespace: str, pod_uid: str | None = None) -> list[dict[str, Any]]:
        out = []
        for nad in self.list_objects(*NAD_API, namespace=namespace):
            binding = (nad["metadata"].get("annotations") or {}).get(keys.BINDING_ANNOTATION)
            if binding and (pod_uid is None or json.loads(binding).get("podUID") == pod_uid):
                out.append(nad)
        return out

    def nad(self, namespace: str, name: str) -> dict[str, Any]:
        return self.get_object(*NAD_API, name, namespace=namespace)

    def claim_of(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        (status,) = [
            s for s in pod["status"].get("resourceClaimStatuses") or [] if s.get("resourceClaimName")
        ]
        return self.get_object(
            "resource.k8s.io",
            "v1",
            "resourceclaims",
            status["resourceClaimName"],
            namespace=pod["metadata"]["namespace"],
        )

    def gpu_attributes(self) -> dict[str, dict[str, Any]]:
        return {d["name"]: d["attributes"] for s in self.gpu_slices() for d in s["spec"].get("devices") or []}

    def gpu_slices(self) -> list[dict[str, Any]]:
        selector = f"spec.nodeName={self.node_name},spec.driver={GPU_DRIVER}"
        return self.list_objects("resource.k8s.io", "v1", "resourceslices", field_selector=selector)

    def publish_gpus(self) -> None:
        """The NVIDIA driver's publication for the fake node's GPUs (tests/support/gpu.py)."""
        self.withdraw_gpus()
        self.objects.create_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", gpu_slice(self.node_name, self.fake_node.gpus)
        )

    def withdraw_gpus(self) -> None:
        for item in self.gpu_slices():
            with contextlib.suppress(ApiException):
                self.objects.delete_cluster_custom_object(
                    "resource.k8s.io", "v1", "resourceslices", item["metadata"]["name"]
                )

    @contextlib.contextmanager
    def vf_locks(self, pcis: Sequence[str]) -> Iterator[None]:
        """Hold the sriov plugin's own per-VF locks. Its DEL keeps a VF's lock from the IPAM release
        to the VF's move back to the host, so what is read under them never sees a DEL half-way."""
        with contextlib.ExitStack() as held:
            for pci in sorted(pcis):  # one order for everyone; the plugin takes a single lock
                held.enter_context(sriov_state.device_lock(str(self.run / "sriov-data"), pci))
            yield

    def whereabouts_allocations(self, network_names: Sequence[str]) -> list[str]:
        """IPs whereabouts still holds on these networks (IPPools and overlapping reservations)."""
        group, version = WHEREABOUTS_API
        held = []
        for pool in self.list_objects(group, version, "ippools", namespace="kube-system"):
            if any(pool["metadata"]["name"].startswith(n + "-") for n in network_names):
                held += [
                    f"{pool['metadata']['name']}#{k} {v.get('podref')}"
                    for k, v in (pool["spec"].get("allocations") or {}).items()
                ]
        return held

    def reserved_ips(self, pod_refs: Sequence[str]) -> list[str]:
        group, version = WHEREABOUTS_API
        reservations = self.list_objects(
            group, version, "overlappingrangeipreservations", namespace="kube-system"
        )
        return [r["metadata"]["name"] for r in reservations if r["spec"].get("podref") in pod_refs]

    def vfs_not_home(self) -> list[str]:
        out = []
        for vf in self.fake_node.vfs:
            link = host_link(vf.netdev)
            if link is None or link["address"] != vf.mac:
                out.append(f"{vf.netdev} ({vf.pci})")
        return out

    def cni_calls_in_flight(self, command: str) -> list[int]:
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

    def orphan_scan(self) -> dict[str, Any]:
        """``sriov-dra orphans`` (a dry run) for this node against its driver's checkpoint."""
        argv = [str(BIN / "sriov-dra"), "orphans", "--node", self.node_name, "-o", "json"]
        out = subprocess.run(
            [*argv, "--checkpoint", str(self.checkpoint), "--kubeconfig", str(self.bed.kubeconfig)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if out.returncode != 0:
            raise ReasonedError("OrphanScanFailed", f"sriov-dra orphans on {self.node_name}: {out.stderr}")
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc

    def checkpoint_claims(self) -> dict[str, Any]:
        if not self.checkpoint.exists():
            return {}
        claims: dict[str, Any] = json.loads(self.checkpoint.read_text())["data"]["claims"]
        return claims

    # -- what this run's sandboxes left behind ------------------------------------------------------

    def sandbox_netns(self) -> list[str]:
        """Network namespaces the kubelet made that still exist, and sandboxes it still holds."""
        if self.kubelet is None:
            return [
                f"netns {sb.netns_path} (Pod {sb.namespace}/{sb.pod})"
                for sb in self.observed.values()
                if Path(sb.netns_path).exists()
            ]
        created, _, held = self.kubelet.made()
        present = set(netns.listnetns())
        return [
            f"netns {sb.netns} (Pod {sb.namespace}/{sb.pod}"
            + (", still held by the kubelet)" if sb.netns in held else ")")
            for sb in created
            if sb.netns in present or sb.netns in held
        ]

    def sandbox_host_links(self) -> list[str]:
        """Host ends (ptp's veth) that this run's CNI ADDs reported and that still exist."""
        links = self.observed_links if self.kubelet is None else self.kubelet.made()[1]
        return [f"host link {name}" for name in sorted(links) if host_link(name) is not None]

    @property
    def host_local_dir(self) -> Path:
        return self.run / "host-local"

    def sandboxes_made(self) -> tuple[list[Sandbox] | list[ObservedSandbox], set[str]]:
        """Every sandbox this run's kubelet made (the real one's: as observed), and the host links
        their ADDs reported."""
        if self.kubelet is None:
            return list(self.observed.values()), set(self.observed_links)
        created, links, _ = self.kubelet.made()
        return created, links

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

    def cni_cache_files(self) -> list[str]:
        """Cache files naming a container ID of this run: cni-shim's delegate cache and libcni's."""
        made = self.observed.values() if self.kubelet is None else self.kubelet.made()[0]
        ids = {sb.container_id for sb in made}
        found = []
        for root in (self.run / "shim-cache", LIBCNI_CACHE_DIR):
            if root.is_dir():
                found += [
                    str(p) for p in root.rglob("*") if p.is_file() and any(cid in p.name for cid in ids)
                ]
        return sorted(found)

    def sandbox_leftovers(self) -> list[str]:
        return [
            *self.sandbox_netns(),
            *self.sandbox_host_links(),
            *self.host_local_leases(),
            *self.cni_cache_files(),
        ]


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


@dataclass(frozen=True)
class ObservedSandbox:
    """A real kubelet's Pod sandbox as this run saw it running."""

    namespace: str
    pod: str
    netns_path: str
    container_id: str


# -- observing a running Pod ------------------------------------------------------------------------


@dataclass
class Observed:
    pod: dict[str, Any]
    claim: dict[str, Any]
    shadows: list[dict[str, Any]]
    links: dict[str, Any]
    rows: list[Row]

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])


def _results(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(claim["status"]["allocation"]["devices"]["results"])


def _binding(nad: Mapping[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(nad["metadata"]["annotations"][keys.BINDING_ANNOTATION])
    return doc


def _partner(template_constraints: Sequence[Mapping[str, Any]], request: str) -> str:
    for c in template_constraints:
        if c.get("matchAttribute") == PCIE_ROOT and request in c["requests"]:
            return next((r for r in c["requests"] if r != request), "")
    return ""


def observe(stack: Stack, pod: Mapping[str, Any]) -> Observed:
    namespace = pod["metadata"]["namespace"]
    live = stack.read_pod(namespace, pod["metadata"]["name"]) or {}
    stack = stack.on(live["spec"]["nodeName"])
    claim = stack.claim_of(live)
    results = _results(claim)
    by_request = {r["request"]: r for r in results}
    constraints = claim["spec"]["devices"].get("constraints") or []
    shadows = stack.shadows(namespace, live["metadata"]["uid"])
    by_pci = {_binding(s)["pciAddress"]: s for s in shadows}
    links = ns_links(stack.netns_path(live["metadata"]["uid"]))
    published = stack.published()
    rows = []
    for result in sorted((r for r in results if r["driver"] == DRIVER), key=lambda r: r["request"]):
        attrs = published.get(result["device"], {})
        pci = str(attrs.get("resource.kubernetes.io/pciBusID", {}).get("string", "?"))
        partner = by_request.get(_partner(constraints, result["request"]))
        shadow = by_pci.get(pci)
        binding = _binding(shadow) if shadow else {}
        interface = str(binding.get("interface", "-"))
        addresses = ipv4_addresses(links.get(interface, {}))
        rail = next((vf.rail for vf in stack.fake_node.vfs if vf.pci == pci), "?")
        rows.append(
            Row(
                request=result["request"],
                gpu=str(partner["device"]) if partner else "-",
                vf_pci=pci,
                pcie_root=str(attrs.get(PCIE_ROOT, {}).get("string", "?")),
                rail=rail,
                source_nad="/".join((binding.get("source") or {}).get(k, "?") for k in ("namespace", "name"))
                if binding
                else "-",
                shadow_nad=str(shadow["metadata"]["name"]) if shadow else "-",
                interface=interface,
                ip=",".join(addresses) or "-",
            )
        )
    return Observed(live, claim, shadows, links, rows)


# -- checks (spec 14.4) -----------------------------------------------------------------------------


def _vf(stack: Stack, pci: str) -> VfRecord | None:
    return next((vf for vf in stack.fake_node.vfs if vf.pci == pci), None)


def check_allocation(obs: Observed, gpus: int, vfs: int) -> Check:
    results = _results(obs.claim)
    got_gpus = {(r["pool"], r["device"]) for r in results if r["driver"] == GPU_DRIVER}
    got_vfs = {(r["pool"], r["device"]) for r in results if r["driver"] == DRIVER}
    detail = f"{len(got_gpus)} distinct GPU result(s), {len(got_vfs)} distinct VF result(s) of {len(results)}"
    return check(
        f"the scheduler allocated {gpus} distinct GPUs and {vfs} distinct VFs",
        (len(got_gpus), len(got_vfs), len(results)) == (gpus, vfs, gpus + vfs),
        detail,
    )


def check_shadows(obs: Observed, expected: int) -> Check:
    name = f"exactly {expected} shadow NAD(s), each with the exact Pod ownerReference (blockOwnerDeletion false) and the finalizer"
    meta = obs.pod["metadata"]
    want = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "uid": meta["uid"],
            "blockOwnerDeletion": False,
        }
    ]
    problems = []
    for nad in obs.shadows:
        refs = [
            {k: v for k, v in r.items() if k != "controller" or v}
            for r in nad["metadata"].get("ownerReferences") or []
        ]
        if refs != want:
            problems.append(f"{nad['metadata']['name']}: ownerReferences {refs}")
        if keys.PROTECTION_FINALIZER not in (nad["metadata"].get("finalizers") or []):
            problems.append(f"{nad['metadata']['name']}: no {keys.PROTECTION_FINALIZER}")
    if len(obs.shadows) != expected:
        problems.insert(0, f"found {len(obs.shadows)}")
    return check(
        name, not problems, "; ".join(problems) or ", ".join(s["metadata"]["name"] for s in obs.shadows)
    )


def check_interfaces(obs: Observed) -> Check:
    want = {row.request: f"dra{i}" for i, row in enumerate(obs.rows)}
    got = {row.request: row.interface for row in obs.rows}
    names = ", ".join(f"{r} -> {i}" for r, i in got.items())
    verb = " become " if len(want) > 1 else " becomes "
    return check(" and ".join(want) + verb + " and ".join(want.values()), got == want and bool(want), names)


def check_addresses(stack: Stack, obs: Observed) -> Check:
    problems = []
    for row in obs.rows:
        vf = _vf(stack, row.vf_pci)
        if vf is None:
            problems.append(f"{row.request}: VF {row.vf_pci} is not on the fake node")
            continue
        inside = ipv4_addresses(obs.links.get(row.interface, {}))
        if not inside:
            problems.append(f"{row.request}: no IPv4 address on {row.interface} in the Pod netns")
        for addr in inside:
            if netaddr.IPNetwork(addr).ip not in netaddr.IPNetwork(vf.subnet):
                problems.append(f"{row.request}: {addr} on {row.interface} is outside {vf.rail} {vf.subnet}")
    detail = "; ".join(problems) or ", ".join(f"{r.interface} {r.ip} in {r.rail}" for r in obs.rows)
    return check(
        "each IP is inside its own rail's subnet, on the named interface inside the Pod netns",
        not problems and bool(obs.rows),
        detail,
    )


def check_pcie_roots(stack: Stack, obs: Observed) -> Check:
    gpus = stack.gpu_attributes()
    topology = {g.name: g.pcie_root for g in stack.fake_node.gpus}
    problems, pairs = [], []
    for row in obs.rows:
        gpu = row.gpu
        vf = _vf(stack, row.vf_pci)
        published = str(gpus.get(gpu, {}).get(PCIE_ROOT, {}).get("string", ""))
        roots = {published, row.pcie_root, topology.get(gpu, ""), vf.pcie_root if vf else ""}
        pairs.append(f"{row.gpu}+{row.request} on {row.pcie_root}")
        if len(roots) != 1 or "" in roots:
            problems.append(f"{row.gpu} / {row.request}: roots {sorted(roots)}")
    return check(
        "each pair's GPU and VF share a pcieRoot (published and in the node's topology)",
        not problems and bool(pairs),
        "; ".join(problems) or ", ".join(pairs),
    )


def check_no_user_selection(obs: Observed, workload: Workload, source_names: Sequence[str]) -> Check:
    problems = []
    annotations = workload.pod["metadata"].get("annotations") or {}
    if keys.NETWORKS_ANNOTATION in annotations:
        problems.append("the workload Pod YAML has a networks annotation")
    text = yaml.safe_dump_all([*workload.workload, workload.pod])
    problems += [f"workload YAML names {word!r}" for word in [*source_names, "resourceName"] if word in text]
    live = obs.pod["metadata"].get("annotations") or {}
    registry = json.loads(live.get(keys.REGISTRY_ANNOTATION, '{"entries": []}'))
    owned = {(e["namespace"], e["name"], e["interface"]) for e in registry.get("entries", [])}
    selections = json.loads(live.get(keys.NETWORKS_ANNOTATION, "[]"))
    ns = obs.pod["metadata"]["namespace"]
    user = [s for s in selections if (s.get("namespace", ns), s["name"], s.get("interface")) not in owned]
    if user:
        problems.append(f"the live Pod has selections nobody generated: {user}")
    detail = (
        "; ".join(problems) or f"{len(selections)} selection(s) on the live Pod, all generated by the driver"
    )
    return check(
        "no user-written networks annotation; the workload YAML selects no NAD", not problems, detail
    )


def check_shadow_content(stack: Stack, obs: Observed, workload: Workload) -> Check:
    """Each shadow is bound to this Pod, claim and node, carries its VF's PCI as the sriov
    deviceID, and keeps its source's CNI network name and rail IPAM exactly."""
    sources = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): json.loads(d["spec"]["config"])
        for d in workload.admin
        if d["kind"] == "NetworkAttachmentDefinition"
    }
    want = (obs.uid, obs.claim["metadata"]["uid"], obs.pod["spec"]["nodeName"])
    problems = []
    for nad in obs.shadows:
        name, binding = nad["metadata"]["name"], _binding(nad)
        config = json.loads(nad["spec"]["config"])
        source = sources.get((binding["source"]["namespace"], binding["source"]["name"]))
        if (binding["podUID"], binding["claimUID"], binding["nodeName"]) != want:
            problems.append(
                f"{name}: bound to {binding['podUID']}/{binding['claimUID']}/{binding['nodeName']}"
            )
        if (config.get("type"), config.get("deviceID")) != ("sriov", binding["pciAddress"]):
            problems.append(f"{name}: type/deviceID {config.get('type')}/{config.get('deviceID')}")
        if source is None:
            problems.append(f"{name}: source {binding['source']} is not one of the administrator's NADs")
        elif (config.get("name"), config.get("ipam")) != (source["name"], source["ipam"]):
            problems.append(f"{name}: CNI name or IPAM differs from its source")
    detail = "; ".join(problems) or ", ".join(
        f"{_binding(n)['pciAddress']} from {_binding(n)['source']['name']}" for n in obs.shadows
    )
    return check(
        "each shadow is bound to this Pod/claim/node, has its VF as deviceID, and keeps its source's "
        "CNI name and rail IPAM",
        not problems and bool(obs.shadows),
        detail,
    )


def check_device_status(obs: Observed) -> Check:
    """What a DRA user reads on the claim: our driver's status.devices entry for each allocated VF,
    Ready, naming the shadow that serves it; other drivers' devices are not ours to report."""
    ours = {(r["pool"], r["device"]) for r in _results(obs.claim) if r["driver"] == DRIVER}
    shadows = {s["metadata"]["name"] for s in obs.shadows}
    ready: dict[tuple[str, str], str | None] = {}  # our reported device -> its shadow, None if not Ready
    for entry in (obs.claim.get("status") or {}).get("devices") or []:
        if entry["driver"] == DRIVER:
            conditions = entry.get("conditions") or []
            is_ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            shadow = ((entry.get("data") or {}).get("shadow") or {}).get("name")
            ready[(entry["pool"], entry["device"])] = str(shadow) if is_ready else None
    problems = [
        f"{device}: not reported Ready" for pool, device in sorted(ours) if not ready.get((pool, device))
    ]
    problems += [f"{device}: reported, not allocated" for pool, device in sorted(set(ready) - ours)]
    problems += [
        f"{device}: names {shadow}, no shadow of this Pod"
        for (pool, device), shadow in sorted(ready.items())
        if shadow is not None and shadow not in shadows
    ]
    return check(
        "the claim's status.devices reports each allocated VF Ready, with its shadow",
        not problems and bool(ours),
        "; ".join(problems) or ", ".join(f"{d}: {s}" for (_, d), s in sorted(ready.items())),
    )


def check_sources_unchanged(
    before: Mapping[str, tuple[str, str, str]], after: Mapping[str, tuple[str, str, str]]
) -> Check:
    changed = [name for name in before if before[name] != after.get(name)]
    return check(
        "the source NADs are unchanged (uid, resourceVersion, config)",
        not changed,
        ", ".join(changed) or ", ".join(before),
    )


def check_cni_reads(stack: Stack, since: int) -> Check:
    user = stack.bed.user_of("cni")
    events = stack.bed.audit.events(since=since, user=user)
    dra = [f"{e.verb} {e.resource}" for e in events if e.group == "resource.k8s.io"]
    detail = f"{len(events)} request(s) by {user}, {len(dra)} to resource.k8s.io" + (
        f": {dra}" if dra else ""
    )
    return check("the audit log shows zero DRA reads by the CNI side", not dra and bool(events), detail)


def daemon_answers(stack: Stack, command: str, pod: str) -> int:
    """How many ``command`` requests for ``pod`` (namespace/name) cni-shim-daemon logged as ok."""
    if stack.daemon is None:
        return 0
    count = 0
    for line in stack.daemon.log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            count += (
                isinstance(entry, dict) and entry.get("msg") == f"{command} ok" and entry.get("pod") == pod
            )
    return count


CNI_MODE_CHECK = "CNI runs thick: cni-shim hands ADD to cni-shim-daemon, which reads the Pod live"


def check_cni_mode(stack: Stack, obs: Observed, since: int) -> Check:
    name = CNI_MODE_CHECK
    if not stack.thick:
        return Check(name, SKIP, "thin mode was chosen for this run")
    meta = obs.pod["metadata"]
    pod = f"{meta['namespace']}/{meta['name']}"
    adds = daemon_answers(stack, "ADD", pod)
    gets = stack.bed.audit.count(
        since=since, user=stack.bed.user_of("cni"), verb="get", resource="pods", name=meta["name"]
    )
    detail = f"cni-shim-daemon answered ADD ok for {pod} {adds} time(s); {gets} live GET(s) of the Pod"
    return check(name, adds >= 1 and gets >= 1, detail)


def source_snapshot(stack: Stack, workload: Workload) -> dict[str, tuple[str, str, str]]:
    out = {}
    for doc in workload.admin:
        if doc["kind"] == "NetworkAttachmentDefinition":
            nad = stack.nad(doc["metadata"]["namespace"], doc["metadata"]["name"])
            out[nad["metadata"]["name"]] = (
                nad["metadata"]["uid"],
                nad["metadata"]["resourceVersion"],
                nad["spec"]["config"],
            )
    return out


def network_names(workload: Workload) -> list[str]:
    names = []
    for doc in workload.admin:
        if doc["kind"] == "NetworkAttachmentDefinition":
            ipam = json.loads(doc["spec"]["config"]).get("ipam") or {}
            names.append(str(ipam.get("network_name", "")))
    return names


# -- teardown checks ---------------------------------------------------------------------------------


def teardown_checks(stack: Stack, workload: Workload, pod_refs: Sequence[str]) -> list[Check]:
    checks = []

    def poll(what: str, probe: Callable[[], list[str]], timeout: float = CLEANUP_TIMEOUT) -> list[str]:
        with contextlib.suppress(WaitTimeout):
            wait_for(lambda: not probe(), timeout, what=what, interval=0.25)
        return probe()

    left = poll("shadows gone", lambda: [s["metadata"]["name"] for s in stack.shadows(workload.namespace)])
    checks.append(check("no shadow NADs are left", not left, ", ".join(left)))
    held = poll(
        "whereabouts allocations released",
        lambda: stack.whereabouts_allocations(network_names(workload)) + stack.reserved_ips(pod_refs),
    )
    checks.append(check("whereabouts holds no allocations", not held, ", ".join(held)))
    away = poll("VFs back on the host", stack.vfs_not_home)
    checks.append(
        check("every VF is back on the host under its original name and MAC", not away, ", ".join(away))
    )
    claims = sorted(stack.checkpoint_claims())
    checks.append(check("the driver's checkpoint is empty", not claims, ", ".join(claims)))
    # The kubelet finished every teardown before it deleted the Pod, and stop_pod saw the Pod gone.
    # Each check also needs something to have been made: a check of nothing would pass blind.
    made, host_ends = stack.sandboxes_made()
    sandboxes = stack.sandbox_netns()
    checks.append(
        check(
            "no Pod sandbox (network namespace) of this run is left",
            not sandboxes and bool(made),
            ", ".join(sandboxes) or f"{len(made)} sandbox(es) made by this run, all removed",
        )
    )
    leases = stack.host_local_leases()
    checks.append(
        check(
            "the cluster network (ptp, host-local) holds no lease",
            not leases and stack.host_local_dir.is_dir(),
            ", ".join(leases) or f"{stack.host_local_dir} holds no lease",
        )
    )
    # A netns removed without DEL takes its veth pair with it, but the kernel does so asynchronously.
    links = poll("host veths of the sandboxes gone", stack.sandbox_host_links, NETNS_SETTLE_TIMEOUT)
    checks.append(
        check(
            "no host veth of this run's sandboxes is left",
            not links and bool(host_ends),
            ", ".join(links) or f"{len(host_ends)} host veth(s) reported by CNI ADD, all gone",
        )
    )
    cache = stack.cni_cache_files()
    checks.append(
        check(
            "no CNI cache file (cni-shim's, libcni's) of this run's containers is left",
            not cache and bool(made),
            ", ".join(cache) or f"none under {stack.run / 'shim-cache'} or {LIBCNI_CACHE_DIR}",
        )
    )
    return checks


STACK_DOWN_CHECK = "the stopped stack left no sandbox, veth, lease or CNI cache file of this run"


def stack_down_check(stack: Stack) -> Check:
    """After Stack.down(): what it found (and removed) of this run's sandboxes."""
    return check(STACK_DOWN_CHECK, not stack.left_behind, "; ".join(stack.left_behind))


class Stacks:
    """One stack at a time: two drivers or two kubelets on the same node would fight over it."""

    def __init__(self, bed: TestBed, tools: ToolSet) -> None:
        self.bed, self.tools = bed, tools
        self.current: Stack | None = None

    def get(self, *, thick: bool, kubelet: str = REAL, second_node: bool = False) -> Stack:
        for component in ("plugins", "whereabouts", "cnitool"):
            self.tools.require(component)
        if kubelet == REAL:
            for component in realnode.NODE_COMPONENTS:
                self.tools.require(component)
        current = self.current
        if current is not None and (current.thick, current.kubelet_kind, current.second_node) != (
            thick,
            kubelet,
            second_node,
        ):
            self.close()
        if self.current is None:
            stack = Stack(self.bed, thick=thick, kubelet=kubelet, second_node=second_node)
            stack.__enter__()
            self.current = stack
        return self.current

    def close(self) -> None:
        if self.current is not None:
            stack, self.current = self.current, None
            stack.down()
            if stack.left_behind:
                raise ReasonedError("SandboxesLeftBehind", "; ".join(stack.left_behind))


# -- scenarios ---------------------------------------------------------------------------------------


@dataclass
class Running:
    """A workload applied and its Pod started; ``stop`` deletes the Pod like a user would."""

    stack: Stack
    workload: Workload
    pod: dict[str, Any]
    sources: dict[str, tuple[str, str, str]]
    audit_mark: int
    started_s: float

    def observe(self) -> Observed:
        return observe(self.stack, self.pod)


def apply_workload(stack: Stack, workload: Workload) -> dict[str, tuple[str, str, str]]:
    stack.apply(workload.objects())
    stack.label_node(True)
    if any(doc["kind"] == "DeviceClass" and "gpu.nvidia.com" in json.dumps(doc) for doc in workload.workload):
        stack.publish_gpus()
    for node in stack.nodes:
        node.wait_advertised(workload.advertised)
    return source_snapshot(stack, workload)


def remove_workload(stack: Stack, workload: Workload) -> None:
    stack.delete(workload.objects())
    stack.withdraw_gpus()
    stack.label_node(False)


def start_pod(
    stack: Stack, workload: Workload, pod: Mapping[str, Any], sources: dict[str, tuple[str, str, str]]
) -> Running:
    mark = stack.bed.audit.mark()
    started = time.monotonic()
    stack.create_pod(pod)
    live = stack.wait_running(pod["metadata"]["namespace"], pod["metadata"]["name"])
    return Running(stack, workload, live, sources, mark, round(time.monotonic() - started, 2))


def stop_pod(stack: Stack, pod: Mapping[str, Any]) -> list[str]:
    """Delete the Pod as a user would; wait until it and its generated claims are gone.

    Returns the Pod's whereabouts podref. Safe for a Pod that never started or never existed.
    """
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    stack.delete_pod(namespace, name)

    def claims_gone() -> bool:
        claims = stack.list_objects("resource.k8s.io", "v1", "resourceclaims", namespace=namespace)
        owners = [o for c in claims for o in c["metadata"].get("ownerReferences") or []]
        return not any(o["kind"] == "Pod" and o["name"] == name for o in owners)

    wait_for(claims_gone, CLEANUP_TIMEOUT, what=f"claims of Pod {namespace}/{name} deleted", interval=0.25)
    return [f"{namespace}/{name}"]


def spec_checks(stack: Stack, run: Running, obs: Observed, *, gpus: int, vfs: int) -> list[Check]:
    source_names = [
        doc["metadata"]["name"] for doc in run.workload.admin if doc["kind"] == "NetworkAttachmentDefinition"
    ]
    checks = [
        check_cni_mode(stack, obs, run.audit_mark),
        check_allocation(obs, gpus, vfs),
        check_shadows(obs, vfs),
        check_shadow_content(stack, obs, run.workload),
        check_device_status(obs),
        check_interfaces(obs),
        check_addresses(stack, obs),
    ]
    if gpus:
        checks.append(check_pcie_roots(stack, obs))
    checks += [
        check_no_user_selection(obs, run.workload, source_names),
        check_sources_unchanged(run.sources, source_snapshot(stack, run.workload)),
        check_cni_reads(stack, run.audit_mark),
    ]
    return checks


def run_workload(stack: Stack, workload: Workload, *, gpus: int, vfs: int) -> Result:
    """Apply, start the Pod, observe and check it, delete it, check the teardown, remove the objects."""
    result = Result(
        workload.name, "thick" if stack.thick else "thin", stack.kubelet_kind, timings=dict(stack.timings)
    )
    sources = apply_workload(stack, workload)
    try:
        run = start_pod(stack, workload, workload.pod, sources)
        result.timings["pod_running_s"] = run.started_s
        obs = run.observe()
        result.rows = obs.rows
        result.checks = spec_checks(stack, run, obs, gpus=gpus, vfs=vfs)
        started = time.monotonic()
        refs = stop_pod(stack, workload.pod)
        result.timings["pod_deleted_s"] = round(time.monotonic() - started, 2)
        result.after_teardown = teardown_checks(stack, workload, refs)
    except ReasonedError as exc:
        result.checks.append(
            Check(f"Pod {workload.pod['metadata']['name']} runs", FAIL, f"{exc.reason}: {exc.message}")
        )
        with contextlib.suppress(ReasonedError):
            stop_pod(stack, workload.pod)
    finally:
        remove_workload(stack, workload)
    return result


def run_pairs(stack: Stack) -> Result:
    return run_workload(stack, pairs_workload(stack.fake_node, stack.whereabouts_ipam()), gpus=2, vfs=2)


def run_one_network(stack: Stack) -> Result:
    return run_workload(stack, one_network_workload(stack.fake_node, stack.whereabouts_ipam()), gpus=0, vfs=1)


@contextlib.contextmanager
def applied(stack: Stack, workload: Workload) -> Iterator[dict[str, tuple[str, str, str]]]:
    """The workload's objects for the duration of a block (tests start several Pods under it)."""
    sources = apply_workload(stack, workload)
    try:
        yield sources
    finally:
        remove_workload(stack, workload)


@contextlib.contextmanager
def running_pairs(stack: Stack) -> Iterator[Running]:
    """The pairs workload's Pod running for the duration of a block; after it the Pod is deleted as
    a user would, and anything the teardown checks find left behind fails the block."""
    pairs = pairs_workload(stack.fake_node, stack.whereabouts_ipam())
    with applied(stack, pairs) as sources:
        run = start_pod(stack, pairs, pairs.pod, sources)
        try:
            yield run
        finally:
            refs = stop_pod(stack, pairs.pod)
        after_teardown = teardown_checks(stack, pairs, refs)
        if any(c.status != PASS for c in after_teardown):
            raise ReasonedError("TeardownIncomplete", render_checks(after_teardown))
