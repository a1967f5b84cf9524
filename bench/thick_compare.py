"""CNI ADD+DEL side by side: cni-shim (thick live reads on/off, thin; Pod Events on, and off for
thick live and thin) vs Multus (thick, thin; Multus always records its Events).

    python -m bench.thick_compare [--cycles 200] [--warmup 5] [--setups live,multus-thick]

Same API server (the local test bed; TESTBED_STATE attaches to a running one), same Pod, same
two NADs and the same real delegates (ptp + host-local for the cluster network and for each NAD)
in one network namespace. One cycle is the runtime's ADD then DEL of one container, each a fresh
plugin process; the setups take turns cycle by cycle so machine drift hits them alike. Each setup
talks to the API server as its own user, so the audit log attributes every request, and each
request is counted for the ADD or the DEL whose wall-clock window it arrived in (a Pod Event,
which the daemon writes after its reply, for the ADD before it). Also: each
shim's process start-up (VERSION). Needs root (netns) and the built tools (k8s, etcd, plugins,
multus).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from kubernetes import client

from bench.common import multus_daemon_process, network_namespace, standalone, summary
from cni_shim import launcher
from cni_shim.kube import kubeconfig
from cni_shim.kube.thin_client import KubeClient
from testbed import pki
from testbed.bed import TestBed
from testbed.cni_daemon import DAEMON, DAEMON_RULES, DaemonProc, shim_conf
from testbed.nodecni import make_cni_bin_dir
from testbed.tools import ToolSet

REPO = Path(__file__).resolve().parents[1]
MULTUS_RULES = [
    *DAEMON_RULES,
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
]
CID = "bench0"
NADS = ("side-a", "side-b")
OURS_LIVE = "cni-shim thick, live reads on"
OURS_CACHED = "cni-shim thick, live reads off"
OURS_THIN = "cni-shim thin"
# Pod Events (issue #18 point 5) are on by default, as in Multus; these two turn them off.
OURS_LIVE_QUIET = "cni-shim thick, live, events off"
OURS_THIN_QUIET = "cni-shim thin, events off"
MULTUS_THICK = "Multus thick"
MULTUS_THIN = "Multus thin"
# The floor no meta-plugin can beat: the same three delegates run directly by cnitool, one network
# per invocation, ADD then DEL; a meta-plugin's overhead is its ADD+DEL minus this.
FLOOR = "delegates alone (cnitool)"
OVERHEAD = (OURS_LIVE, OURS_CACHED, OURS_LIVE_QUIET, MULTUS_THICK, OURS_THIN, MULTUS_THIN)
PEER = {
    OURS_LIVE: MULTUS_THICK,
    OURS_CACHED: MULTUS_THICK,
    OURS_THIN: MULTUS_THIN,
    OURS_LIVE_QUIET: MULTUS_THICK,
    OURS_THIN_QUIET: MULTUS_THIN,
}
# Short names for --setups, so a profiling session can run only the pair it is working on.
SHORT = {
    "live": OURS_LIVE,
    "cached": OURS_CACHED,
    "thin": OURS_THIN,
    "live-quiet": OURS_LIVE_QUIET,
    "thin-quiet": OURS_THIN_QUIET,
    "multus-thick": MULTUS_THICK,
    "multus-thin": MULTUS_THIN,
    "floor": FLOOR,
}


@dataclass
class Setup:
    label: str
    binary: Path
    conf: dict[str, Any]
    user: str
    daemon_pid: int | None = None
    samples: list[float] = field(default_factory=list)
    cpu: list[tuple[float, float, float]] = field(default_factory=list)
    windows: list[tuple[float, float, str]] = field(default_factory=list)
    # CPU ms of the API server (and etcd) per cycle, when the caller measures it.
    server_cpu: list[float] = field(default_factory=list)
    # Runs one verb instead of the meta-plugin binary (the floor: cnitool per network).
    direct: Callable[[str, str, str, Path], None] | None = None

    def cpu_ms(self) -> tuple[float, float, float]:
        """CPU milliseconds so far of (the plugin processes this bench ran, the setup's daemon
        itself, the delegates that daemon ran); a busy node's wall time counts everyone's work,
        this counts only the setup's own."""
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        plugins = (children.ru_utime + children.ru_stime) * 1000
        if self.daemon_pid is None:
            return plugins, 0.0, 0.0  # thin: the delegates are the plugin process's children
        # utime, stime, cutime, cstime: fields 14-17 of /proc/<pid>/stat, after the command.
        ticks = [
            int(v) for v in Path(f"/proc/{self.daemon_pid}/stat").read_text().rsplit(")", 1)[1].split()[11:15]
        ]
        per_tick = 1000 / os.sysconf("SC_CLK_TCK")
        return plugins, (ticks[0] + ticks[1]) * per_tick, (ticks[2] + ticks[3]) * per_tick

    def run(self, command: str, netns: str, args: str, bin_dir: Path) -> None:
        start = time.time()
        if self.direct is not None:
            self.direct(command, netns, args, bin_dir)
        else:
            cni(self.binary, command, self.conf, netns, args, bin_dir)
        self.windows.append((start, time.time(), command))

    def per_verb(self) -> dict[str, float]:
        """Median milliseconds of ADD alone and of DEL alone (the runtime's view, shim process included)."""
        return {
            f"{verb}_median": summary([(end - start) * 1000 for start, end, c in self.windows if c == verb])[
                "median"
            ]
            for verb in ("ADD", "DEL")
        }


def ptp(name: str, subnet: str, data_dir: Path) -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": name,
        "type": "ptp",
        "ipam": {"type": "host-local", "subnet": subnet, "dataDir": str(data_dir)},
    }


def workload(bed: TestBed, ns: str, data_dir: Path) -> tuple[str, str]:
    """A namespace with two ptp NADs and a Pod on the bed's node selecting both; returns (pod, uid)."""
    api = bed.api_client
    client.CoreV1Api(api).create_namespace(client.V1Namespace.model_validate({"metadata": {"name": ns}}))
    for index, name in enumerate(NADS):
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "k8s.cni.cncf.io",
            "v1",
            ns,
            "network-attachment-definitions",
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": name},
                "spec": {"config": json.dumps(ptp(name, f"10.91.{index}.0/24", data_dir))},
            },
        )
    pod = client.CoreV1Api(api).create_namespaced_pod(
        ns,
        client.V1Pod.model_validate(
            {
                "metadata": {"name": "bench", "annotations": {"k8s.v1.cni.cncf.io/networks": ",".join(NADS)}},
                "spec": {
                    "nodeName": bed.node_name,
                    "containers": [{"name": "c", "image": "registry.invalid/none:0"}],
                },
            }
        ),
    )
    assert pod.metadata is not None
    return "bench", str(pod.metadata.uid)


class Workload(NamedTuple):
    """bench's Pod in its own namespace, the CNI_ARGS naming it, and a kubeconfig allowed what the daemon is."""

    namespace: str
    args: str
    kubeconfig: Path


def profiled_workload(bed: TestBed, work: Path, prefix: str) -> Workload:
    """workload() plus an identity with the daemon's rights, for the single-setup profilers."""
    ns = f"{prefix}-{secrets.token_hex(3)}"
    pod, uid = workload(bed, ns, work / "ipam")
    user = f"{prefix}-{secrets.token_hex(2)}"
    kubeconfig = bed.issue_identity(user, user)
    bed.grant(user, DAEMON_RULES)
    return Workload(
        ns, f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={pod};K8S_POD_UID={uid}", kubeconfig
    )


def cni(binary: Path, command: str, conf: Mapping[str, Any], netns: str, args: str, bin_dir: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": CID,
        "CNI_NETNS": netns,
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": args,
        "CNI_PATH": str(bin_dir),
    }
    out = subprocess.run(
        [str(binary)], input=json.dumps(conf).encode(), env=env, capture_output=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(
            f"{binary.name} {command} failed ({out.returncode}): {out.stdout.decode()}{out.stderr.decode()}"
        )


def cnitool_floor(cnitool: Path, net_dir: Path, networks: list[dict[str, Any]]) -> Setup:
    """The delegates a meta-plugin runs for the workload, each network run by cnitool itself (ADD in
    order, DEL in reverse, as Multus does) on the interface the meta-plugin would give it."""
    net_dir.mkdir()
    for index, conf in enumerate(networks):
        (net_dir / f"{10 + index}-{conf['name']}.conf").write_text(json.dumps(conf))
    ifnames = ["eth0", *(f"net{i}" for i in range(1, len(networks)))]

    def direct(command: str, netns: str, args: str, bin_dir: Path) -> None:
        pairs = list(zip(networks, ifnames, strict=True))
        for conf, ifname in pairs if command == "ADD" else reversed(pairs):
            env = {
                "PATH": os.environ.get("PATH", ""),
                "NETCONFPATH": str(net_dir),
                "CNI_PATH": str(bin_dir),
                "CNI_IFNAME": ifname,
                "CNI_ARGS": args,
            }
            verb = command.lower()
            out = subprocess.run(
                [str(cnitool), verb, conf["name"], netns], env=env, capture_output=True, check=False
            )
            if out.returncode != 0:
                raise SystemExit(
                    f"cnitool {verb} {conf['name']} failed: {out.stdout.decode()}{out.stderr.decode()}"
                )

    return Setup(FLOOR, cnitool, {}, "", direct=direct)


def _received(event: Any) -> float:
    return datetime.fromisoformat(
        str(event.raw["requestReceivedTimestamp"]).replace("Z", "+00:00")
    ).timestamp()


def api_calls(bed: TestBed, since: int, setup: Setup) -> dict[str, dict[str, float]]:
    """Requests per ADD and per DEL by verb and resource; informer lists and watches are left out.

    A Pod Event the daemon writes after its reply is the ADD's cost too: it counts for the last ADD
    that started before it, wherever it lands."""
    starts = [w[0] for w in setup.windows]
    tally: dict[str, dict[str, int]] = {"ADD": {}, "DEL": {}}
    for e in bed.audit.events(since=since, user=setup.user):
        if e.verb in ("list", "watch"):
            continue
        at = bisect_right(starts, _received(e)) - 1
        if e.resource == "events":
            while at >= 0 and setup.windows[at][2] != "ADD":
                at -= 1
            if at < 0:
                continue
        elif at < 0 or _received(e) > setup.windows[at][1]:
            continue  # outside every request: start-up or background work
        what = f"{e.verb} {e.resource}" + (f"/{e.subresource}" if e.subresource else "")
        per = tally[setup.windows[at][2]]
        per[what] = per.get(what, 0) + 1
    count = {c: sum(1 for w in setup.windows if w[2] == c) for c in ("ADD", "DEL")}
    return {c: {k: v / count[c] for k, v in sorted(t.items())} for c, t in tally.items()}


def startup_ms(binary: Path, runs: int = 51) -> dict[str, Any]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(binary)], env={"CNI_COMMAND": "VERSION"}, capture_output=True, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return summary(samples)


# What a thin ADD of a Pod with a networks annotation imports, the deferred imports included.
THIN_MODULES = (
    "cni_shim.main",
    "cni_shim.thick.forward",
    "cni_shim.handler",
    "cni_shim.handler.add",
    "cni_shim.app.thin",
    "cni_shim.kube.thin_client",
    "cni_shim.core.delegates",
    "sriov_contract.networks",
)
OWN_PACKAGES = ("cni_shim", "sriov_contract", "sriov_lib")


def thin_imports(runs: int = 7) -> dict[str, Any]:
    """What a thin ADD's imports cost (python -X importtime, the launcher's -S interpreter): the
    median run's total, our own modules' share, and the standard-library modules our code pulls in
    directly, heaviest first (cumulative, so each counts what it imports in turn)."""
    code = f"import sys; sys.path.insert(0, {str(REPO)!r}); import {', '.join(THIN_MODULES)}"
    env = {"PATH": os.environ.get("PATH", "")}  # bytecode caches on, as on a node
    measured = []
    for _ in range(runs):
        err = subprocess.run(
            [sys.executable, "-S", "-X", "importtime", "-c", code], env=env, capture_output=True, check=True
        ).stderr.decode()
        measured.append(_import_tree(err))
    measured.sort(key=lambda m: m["total_ms"])
    return measured[len(measured) // 2]


def _import_tree(text: str) -> dict[str, Any]:
    rows = []
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own_us, cumulative_us, module = line[len("import time:") :].split("|", 2)
        depth = (len(module) - len(module.lstrip()) - 1) // 2
        rows.append((module.strip(), int(own_us) / 1000, int(cumulative_us) / 1000, depth))
    parents: list[str] = []  # importtime prints a module after everything it imported
    boundary: dict[str, float] = {}
    for name, _own, cumulative, depth in reversed(rows):
        del parents[depth:]
        parent = parents[-1] if parents else ""
        if not name.startswith(OWN_PACKAGES) and (not parent or parent.startswith(OWN_PACKAGES)):
            boundary[name] = boundary.get(name, 0.0) + cumulative
        parents.append(name)
    return {
        "total_ms": sum(r[1] for r in rows),
        "ours_ms": sum(r[1] for r in rows if r[0].startswith(OWN_PACKAGES)),
        "top": sorted(boundary.items(), key=lambda kv: -kv[1])[:6],
    }


def multus_identity(bed: TestBed, work: Path) -> tuple[Path, Path]:
    """A per-node certificate already in Multus's cert store, so multus-daemon needs no CSR round."""
    user = f"system:multus:{bed.node_name}"
    ca = pki.CertificateAuthority.open(bed.state.pki_dir)
    pair = ca.issue_client("multus-bench", user, ("system:multus",))
    cert_dir = work / "multus-certs"
    cert_dir.mkdir()
    (cert_dir / "multus-client-current.pem").write_bytes(pair.cert.read_bytes() + pair.key.read_bytes())
    bootstrap = work / "multus-bootstrap.kubeconfig"
    ca_data = base64.b64encode(Path(bed.ca_file).read_bytes()).decode()
    bootstrap.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "bed", "cluster": {"server": bed.server, "certificate-authority-data": ca_data}}
                ],
                "users": [
                    {"name": "m", "user": {"client-certificate": str(pair.cert), "client-key": str(pair.key)}}
                ],
                "contexts": [{"name": "m", "context": {"cluster": "bed", "user": "m"}}],
                "current-context": "m",
            }
        )
    )
    bed.grant(user, MULTUS_RULES)
    return bootstrap, cert_dir


@contextmanager
def multus_daemon(
    bed: TestBed, multus_dir: Path, work: Path, daemon_conf: dict[str, Any], log_level: str = "error"
) -> Iterator[tuple[Path, int]]:
    """multus-daemon serving; yields its socket directory and process ID. ``log_level``: "verbose"
    logs each request's start and finish (what bench.podready reads), as Multus's own deployment does."""
    bootstrap, cert_dir = multus_identity(bed, work)
    socket_dir = work / "multus-sock"
    conf_dir = work / "multus-net.d"
    conf_dir.mkdir()
    # With a user-supplied multusConfigFile, multus-daemon v4.2 returns from main at once; only
    # "auto" keeps it running, so it gets a primary network to discover.
    auto_dir = work / "multus-auto"
    auto_dir.mkdir()
    (auto_dir / "10-podnet.conf").write_text(json.dumps(daemon_conf["delegates"][0]))
    config = {
        **daemon_conf,
        "socketDir": str(socket_dir),
        "cniConfigDir": str(conf_dir),
        "cniVersion": "1.0.0",
        "multusConfigFile": "auto",
        "multusAutoconfigDir": str(auto_dir),
        "logToStderr": True,
        "logLevel": log_level,
        "perNodeCertificate": {
            "enabled": True,
            "bootstrapKubeconfig": str(bootstrap),
            "certDir": str(cert_dir),
            "certDuration": "24h",
        },
    }
    path = work / "multus-daemon-config.json"
    path.write_text(json.dumps(config))
    with multus_daemon_process(
        multus_dir, path, socket_dir, work / "multus-daemon.log", bed.node_name
    ) as pid:
        yield socket_dir, pid


def _identity(bed: TestBed, user: str, rules: list[dict[str, Any]]) -> Path:
    path = bed.issue_identity(user, user)
    bed.grant(user, rules)
    return path


def _our_daemon(
    stack: ExitStack,
    bed: TestBed,
    work: Path,
    common: dict[str, Any],
    live: bool,
    user: str,
    events: bool = True,
    executable: Path = DAEMON,
) -> DaemonProc:
    daemon_dir = work / f"ours-{'live' if live else 'cached'}{'' if events else '-quiet'}"
    daemon_dir.mkdir()
    config = {
        **common,
        "cniDir": str(daemon_dir / "cache"),
        "kubeconfig": str(_identity(bed, user, DAEMON_RULES)),
        "liveNetworkConfigOnAdd": live,
        "podEvents": events,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env["NODE_NAME"] = bed.node_name
    daemon = DaemonProc(daemon_dir, config, env, executable).start()
    stack.callback(daemon.stop)
    return daemon


def _daemon_side(daemon: DaemonProc) -> dict[str, dict[str, Any]]:
    """Milliseconds inside cni-shim-daemon per request, from its own logs."""
    logs = daemon.logs()
    return {
        command: summary([e["seconds"] * 1000 for e in logs if e.get("msg") == f"{command} ok"])
        for command in ("ADD", "DEL")
    }


@dataclass
class SetupMaker:
    """Makes the setups of one measurement: what they share, and the daemons they started."""

    bed: TestBed
    work: Path
    stack: ExitStack
    bin_dir: Path
    multus_dir: Path
    common: dict[str, Any]
    tag: str
    daemons: dict[str, DaemonProc] = field(default_factory=dict)

    def ours(self, label: str, live: bool, events: bool = True, executable: Path = DAEMON) -> Setup:
        """`executable`: another checkout's cni-shim-daemon (its .venv's), to measure it beside this one."""
        user = f"bench-{'live' if live else 'cached'}{'' if events else '-quiet'}-{self.tag}"
        daemon = _our_daemon(self.stack, self.bed, self.work, self.common, live, user, events, executable)
        self.daemons[label] = daemon
        assert daemon.proc is not None
        return Setup(label, self.bin_dir / "cni-shim", shim_conf(daemon), user, daemon.proc.pid)

    def thin(self, label: str, plugin: str, rules: list[dict[str, Any]], **extra: Any) -> Setup:
        quiet = "-quiet" if extra else ""
        user = f"bench-{plugin}-thin{quiet}-{self.tag}"
        conf = {
            "cniVersion": "1.0.0",
            "name": "multus-cni-network",
            "type": plugin,
            **self.common,
            "cniDir": str(self.work / f"{plugin}-thin{quiet}-cache"),
            "kubeconfig": str(_identity(self.bed, user, rules)),
            **extra,
        }
        return Setup(label, self.bin_dir / plugin, conf, user)

    def multus_thick(self, label: str) -> Setup:
        sock, pid = self.stack.enter_context(
            multus_daemon(
                self.bed, self.multus_dir, self.work, {**self.common, "cniDir": str(self.work / "mc")}
            )
        )
        conf = {
            "cniVersion": "1.0.0",
            "name": "multus-cni-network",
            "type": "multus-shim",
            "daemonSocketDir": str(sock),
        }
        return Setup(label, self.bin_dir / "multus-shim", conf, f"system:multus:{self.bed.node_name}", pid)

    def factories(self, cnitool: Path, primary: dict[str, Any]) -> dict[str, Callable[[], Setup]]:
        """Every setup by label, in the order they are made and take turns."""
        return {
            OURS_LIVE: lambda: self.ours(OURS_LIVE, True),
            OURS_CACHED: lambda: self.ours(OURS_CACHED, False),
            OURS_THIN: lambda: self.thin(OURS_THIN, "cni-shim", DAEMON_RULES),
            OURS_LIVE_QUIET: lambda: self.ours(OURS_LIVE_QUIET, True, events=False),
            OURS_THIN_QUIET: lambda: self.thin(OURS_THIN_QUIET, "cni-shim", DAEMON_RULES, podEvents=False),
            MULTUS_THICK: lambda: self.multus_thick(MULTUS_THICK),
            MULTUS_THIN: lambda: self.thin(MULTUS_THIN, "multus", MULTUS_RULES),
            FLOOR: lambda: cnitool_floor(
                cnitool,
                self.work / "floor-net.d",
                [primary, *(ptp(name, f"10.91.{i}.0/24", self.work / "ipam") for i, name in enumerate(NADS))],
            ),
        }


def warm_up(setups: list[Setup], netns: str, args: str, bin_dir: Path, warmup: int) -> None:
    for setup in setups:
        for _ in range(warmup):
            setup.run("ADD", netns, args, bin_dir)
            setup.run("DEL", netns, args, bin_dir)
        setup.windows.clear()


def run_cycles(
    setups: list[Setup],
    netns: str,
    args: str,
    bin_dir: Path,
    cycles: int,
    server_cpu: Callable[[], float] | None = None,
) -> None:
    """ADD+DEL cycles, the setups taking turns within each cycle so machine drift hits them alike."""
    for _ in range(cycles):
        for setup in setups:
            cpu = setup.cpu_ms()
            server = server_cpu() if server_cpu is not None else 0.0
            start = time.perf_counter()
            setup.run("ADD", netns, args, bin_dir)
            setup.run("DEL", netns, args, bin_dir)
            setup.samples.append((time.perf_counter() - start) * 1000)
            setup.cpu.append(tuple(b - a for a, b in zip(cpu, setup.cpu_ms(), strict=True)))  # type: ignore[arg-type]
            if server_cpu is not None:
                setup.server_cpu.append(server_cpu() - server)


def _latency(setups: list[Setup]) -> dict[str, dict[str, Any]]:
    """Per setup: ADD+DEL latency, each verb alone, CPU; and the ratio to its peer where both ran."""
    latency = {s.label: {**summary(s.samples), **s.per_verb(), **cpu_means(s.cpu)} for s in setups}
    for label, peer in PEER.items():
        if label in latency and peer in latency:
            latency[label]["peer"] = peer
            latency[label]["ratio_median"] = latency[label]["median"] / latency[peer]["median"]
            latency[label]["ratio_p95"] = latency[label]["p95"] / latency[peer]["p95"]
    return latency


def measure(
    bed: TestBed, tools: ToolSet, work: Path, cycles: int, warmup: int, only: Collection[str] = ()
) -> dict[str, Any]:
    """The setups (all seven unless `only` names some), cycle by cycle in turn; returns per-setup
    latency (ADD+DEL and each verb alone), ratios and API calls."""
    multus_dir = tools.require("multus")
    cnitool = tools.binary("cnitool", "cnitool")
    bin_dir = make_cni_bin_dir(work / "bin", tools)
    launcher.install(bin_dir / "cni-shim")  # the -S launcher a node installs, not the venv's console script
    for name in ("multus-shim", "multus"):
        shutil.copy(multus_dir / name, bin_dir / name)
    ns = f"bench-cni-{secrets.token_hex(3)}"
    pod, uid = workload(bed, ns, work / "ipam")
    args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID={CID};K8S_POD_UID={uid}"
    primary = ptp("podnet", "10.90.0.0/24", work / "ipam")
    common = {"binDir": str(bin_dir), "delegates": [primary]}
    with ExitStack() as stack:
        netns = stack.enter_context(network_namespace())
        made = SetupMaker(bed, work, stack, bin_dir, multus_dir, common, secrets.token_hex(2))
        setups = [
            make() for label, make in made.factories(cnitool, primary).items() if not only or label in only
        ]
        warm_up(setups, netns, args, bin_dir, warmup)
        mark = bed.audit.mark()
        run_cycles(setups, netns, args, bin_dir, cycles)
        # The API server writes an audit event just after answering; let the last ones land.
        time.sleep(1.0)
        daemon_side = {label: _daemon_side(daemon) for label, daemon in made.daemons.items()}
        api_floor = api_floor_ms(bed, ns, pod)
    client.CoreV1Api(bed.api_client).delete_namespace(ns)
    latency = _latency(setups)
    return {
        "cycles": cycles,
        "latency_ms": latency,
        "overhead_ms": overheads(latency),
        "api_requests": {s.label: api_calls(bed, mark, s) for s in setups if s.user},
        "daemon_side_ms": daemon_side,
        "startup_ms": {
            "cni-shim": startup_ms(bin_dir / "cni-shim"),
            "multus-shim": startup_ms(bin_dir / "multus-shim"),
        },
        "thin_imports": thin_imports(),
        "api_floor_ms": api_floor,
    }


def api_floor_ms(bed: TestBed, ns: str, pod: str, rounds: int = 40) -> dict[str, dict[str, float]]:
    """What the two requests every live ADD must make cost on this API server by themselves: a
    Pod GET and a status PUT that changes an annotation (an unchanged object is not written),
    one after the other on one kept-alive connection, as a daemon makes them."""
    client_ = KubeClient(kubeconfig.load(str(bed.kubeconfig)))
    gets, puts = [], []
    try:
        for i in range(rounds):
            start = time.perf_counter()
            doc = client_.get_pod(ns, pod)
            got = time.perf_counter()
            assert doc is not None
            doc["metadata"].setdefault("annotations", {})["bench.example/api-floor"] = str(i)
            client_.replace_pod_status(doc)
            gets.append((got - start) * 1000)
            puts.append((time.perf_counter() - got) * 1000)
    finally:
        client_.close()
    return {"pod GET": summary(gets), "status PUT": summary(puts)}


def overheads(latency: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Each meta-plugin's ADD+DEL minus the floor's (median and p95), in this run's milliseconds."""
    if FLOOR not in latency:
        return {}
    floor = latency[FLOOR]
    return {
        label: {stat: latency[label][stat] - floor[stat] for stat in ("median", "p95")}
        for label in OVERHEAD
        if label in latency
    }


def process_cpu_ms(pid: int) -> float:
    """CPU milliseconds so far of one process (user + system, its own threads only)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def cpu_means(samples: list[tuple[float, float, float]]) -> dict[str, float]:
    """Mean CPU milliseconds per cycle, in total and by part (clock ticks are too coarse for medians)."""
    parts = {
        f"cpu_{part}": statistics.fmean(sample[i] for sample in samples)
        for i, part in enumerate(("plugins", "daemon", "delegates"))
    }
    return {"cpu": sum(parts.values()), **parts}


def _calls(per: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in per.items()) or "none"


def report(result: Mapping[str, Any]) -> None:
    print(
        f"CNI ADD+DEL over {result['cycles']} alternating cycles (ptp+host-local cluster network + two NADs, "
        "real API server), ms; CPU: mean per cycle of the plugin processes, the daemon and its delegates:"
    )
    print(
        f"  {'setup':34s} {'median':>8s} {'p95':>8s} {'ADD':>7s} {'DEL':>7s}  {'CPU = plugin+daemon+delegates':30s}"
        "  vs peer (median, p95)"
    )
    for label, s in result["latency_ms"].items():
        ratio = f"x{s['ratio_median']:.2f}, x{s['ratio_p95']:.2f} of {s['peer']}" if "peer" in s else ""
        print(
            f"  {label:34s} {s['median']:8.1f} {s['p95']:8.1f} {s['ADD_median']:7.1f} {s['DEL_median']:7.1f}"
            f"  {s['cpu']:5.0f} = {s['cpu_plugins']:4.0f} + {s['cpu_daemon']:4.0f} + {s['cpu_delegates']:6.0f}      {ratio}"
        )
    if result.get("overhead_ms"):
        floor = result["latency_ms"][FLOOR]["median"]
        print(f"meta-plugin overhead over the delegates alone ({floor:.1f} ms by cnitool), ms median / p95:")
        for label, o in result["overhead_ms"].items():
            print(f"  {label:34s} {o['median']:6.1f} / {o['p95']:6.1f}")
    print("API requests per ADD / per DEL (audit log; informer lists/watches left out):")
    for label, per in result["api_requests"].items():
        print(f"  {label:34s} ADD: {_calls(per['ADD'])}")
        print(f"  {'':34s} DEL: {_calls(per['DEL'])}")
    print("inside cni-shim-daemon per request (from its logs), ms median / p95:")
    for label, per in result["daemon_side_ms"].items():
        for command, s in per.items():
            print(f"  {label + ': ' + command:40s} {s['median']:6.1f} / {s['p95']:6.1f}")
    print("shim process start-up (CNI_COMMAND=VERSION), ms median / p95:")
    for name, s in result["startup_ms"].items():
        print(f"  {name:12s} {s['median']:6.1f} / {s['p95']:6.1f}")
    if result.get("api_floor_ms"):
        print("the two requests every live ADD makes, alone on this API server, ms median / p95:")
        for name, s in result["api_floor_ms"].items():
            print(f"  {name:12s} {s['median']:6.1f} / {s['p95']:6.1f}")
    imports = result.get("thin_imports")
    if imports:
        print(
            f"thin ADD imports (python -X importtime): {imports['total_ms']:.1f} ms, our modules' own "
            f"{imports['ours_ms']:.1f} ms; heaviest standard-library imports, cumulative ms:"
        )
        for name, ms in imports["top"]:
            print(f"  {name:34s} {ms:6.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--setups", default="", help=f"comma-separated subset of {', '.join(SHORT)} (default: all seven)"
    )
    opts = parser.parse_args(argv)
    unknown = [name for name in opts.setups.split(",") if name and name not in SHORT]
    if unknown:
        parser.error(f"unknown setups {unknown}; choose from {', '.join(SHORT)}")
    only = [SHORT[name] for name in opts.setups.split(",") if name]
    return standalone(
        "bench-cni-",
        lambda bed, tools, work: report(measure(bed, tools, work, opts.cycles, opts.warmup, only)),
    )


if __name__ == "__main__":
    sys.exit(main())
