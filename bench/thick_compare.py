"""Thick mode side by side: cni-shim + cni-shim-daemon (live reads on and off) vs multus-shim + multus-daemon.

    python -m bench.thick_compare [--cycles 100] [--warmup 5]

Same API server (the local test bed; TESTBED_STATE attaches to a running one), same Pod, same
NAD and the same real delegates (ptp + host-local for the cluster network and for the NAD) in
one network namespace. One cycle is the runtime's ADD then DEL of one container, each a fresh
shim process; the median over the cycles is reported per setup, plus each shim's process
start-up time (median VERSION run). Needs root (netns) and the built tools (k8s, etcd, plugins,
multus).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client

from cni_shim import launcher
from tests.bed import controlplane, pki
from tests.bed.bed import TestBed
from tests.bed.tools import ToolSet
from tests.support.cni import make_cni_bin_dir
from tests.support.cni_daemon import DAEMON_RULES, DAEMON_USER, DaemonProc, shim_conf

MULTUS_RULES = [
    *DAEMON_RULES,
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
]
CID = "bench0"


@contextmanager
def test_bed(tools: ToolSet) -> Iterator[TestBed]:
    state = os.environ.get("TESTBED_STATE")
    if state:
        yield TestBed.attach(Path(state), tools)
        return
    bed = controlplane.start(tools=tools, run_id=controlplane.new_run_id("bench"))
    try:
        yield bed
    finally:
        bed.stop()


@contextmanager
def network_namespace() -> Iterator[str]:
    name = f"bench-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield f"/run/netns/{name}"
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def ptp(name: str, subnet: str, data_dir: Path) -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": name,
        "type": "ptp",
        "ipam": {"type": "host-local", "subnet": subnet, "dataDir": str(data_dir)},
    }


def workload(bed: TestBed, ns: str, data_dir: Path) -> tuple[str, str]:
    """A namespace with the NAD `side` and a Pod on the bed's node selecting it; returns (pod, uid)."""
    api = bed.api_client
    client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "k8s.cni.cncf.io",
        "v1",
        ns,
        "network-attachment-definitions",
        {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "side"},
            "spec": {"config": json.dumps(ptp("side", "10.91.0.0/24", data_dir))},
        },
    )
    pod = client.CoreV1Api(api).create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "bench", "annotations": {"k8s.v1.cni.cncf.io/networks": "side"}},
            "spec": {
                "nodeName": bed.node_name,
                "containers": [{"name": "c", "image": "registry.invalid/none:0"}],
            },
        },
    )
    return "bench", str(pod.metadata.uid)


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


def api_calls(bed: TestBed, since: int, user: str, count: int) -> str:
    """Requests per cycle the daemon made, by verb and resource (informer lists and watches left out)."""
    tally: dict[str, int] = {}
    for e in bed.audit.events(since=since, user=user):
        if e.verb not in ("list", "watch"):
            what = f"{e.verb} {e.resource}" + (f"/{e.subresource}" if e.subresource else "")
            tally[what] = tally.get(what, 0) + 1
    return ", ".join(f"{k} {v / count:.1f}" for k, v in sorted(tally.items())) or "none"


def cycles(run: Callable[[str], None], count: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        run("ADD")
        run("DEL")
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        run("ADD")
        run("DEL")
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def startup_ms(binary: Path, runs: int = 51) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(binary)], env={"CNI_COMMAND": "VERSION"}, capture_output=True, check=True)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


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
def multus_daemon(bed: TestBed, multus_dir: Path, work: Path, daemon_conf: dict[str, Any]) -> Iterator[Path]:
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
        "logLevel": "verbose",
        "perNodeCertificate": {
            "enabled": True,
            "bootstrapKubeconfig": str(bootstrap),
            "certDir": str(cert_dir),
            "certDuration": "24h",
        },
    }
    path = work / "multus-daemon-config.json"
    path.write_text(json.dumps(config))
    log = (work / "multus-daemon.log").open("wb")
    env = {"PATH": os.environ.get("PATH", ""), "MULTUS_NODE_NAME": bed.node_name}
    proc = subprocess.Popen(
        [str(multus_dir / "multus-daemon"), "-config", str(path)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not (socket_dir / "multus.sock").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(
                    f"multus-daemon did not come up:\n{(work / 'multus-daemon.log').read_text()[-3000:]}"
                )
            time.sleep(0.1)
        yield socket_dir
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    opts = parser.parse_args(argv)
    tools = ToolSet()
    multus_dir = tools.require("multus")
    work = Path(tempfile.mkdtemp(prefix="thick-compare-"))
    bin_dir = make_cni_bin_dir(work / "bin", tools)
    launcher.install(bin_dir / "cni-shim")  # the -S launcher a node installs, not the venv's console script
    shutil.copy(multus_dir / "multus-shim", bin_dir / "multus-shim")
    results: dict[str, list[float]] = {}
    daemon_side: dict[str, float] = {}
    traffic: dict[str, str] = {}
    with test_bed(tools) as bed, network_namespace() as netns:
        ns = f"bench-thick-{secrets.token_hex(3)}"
        pod, uid = workload(bed, ns, work / "ipam")
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID={CID};K8S_POD_UID={uid}"
        primary = ptp("podnet", "10.90.0.0/24", work / "ipam")
        common = {"binDir": str(bin_dir), "delegates": [primary]}
        kubeconfig = bed.issue_identity("cni-shim-daemon", DAEMON_USER)
        bed.grant(DAEMON_USER, DAEMON_RULES)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        env["NODE_NAME"] = bed.node_name
        for live in (True, False):
            label = f"cni-shim thick, live reads {'on' if live else 'off'}"
            daemon_dir = work / f"ours-{int(live)}"
            daemon_dir.mkdir()
            config = {
                **common,
                "cniDir": str(daemon_dir / "cache"),
                "kubeconfig": str(kubeconfig),
                "liveNetworkConfigOnAdd": live,
            }
            daemon = DaemonProc(daemon_dir, config, env).start()
            try:
                conf = shim_conf(daemon)
                mark = bed.audit.mark()
                results[label] = cycles(
                    lambda c, conf=conf: cni(bin_dir / "cni-shim", c, conf, netns, args, bin_dir),
                    opts.cycles,
                    opts.warmup,
                )
            finally:
                daemon.stop()
            traffic[label] = api_calls(bed, mark, DAEMON_USER, opts.cycles + opts.warmup)
            for command in ("ADD", "DEL"):
                inside = [e["seconds"] * 1000 for e in daemon.logs() if e.get("msg") == f"{command} ok"]
                daemon_side[f"{label}: {command}"] = statistics.median(inside)
        with multus_daemon(bed, multus_dir, work, {**common, "cniDir": str(work / "multus-cache")}) as sock:
            conf = {
                "cniVersion": "1.0.0",
                "name": "multus-cni-network",
                "type": "multus-shim",
                "daemonSocketDir": str(sock),
            }
            mark = bed.audit.mark()
            results["Multus thick (multus-shim + multus-daemon)"] = cycles(
                lambda c: cni(bin_dir / "multus-shim", c, conf, netns, args, bin_dir),
                opts.cycles,
                opts.warmup,
            )
        multus_user = f"system:multus:{bed.node_name}"
        traffic["Multus thick (multus-shim + multus-daemon)"] = api_calls(
            bed, mark, multus_user, opts.cycles + opts.warmup
        )
        client.CoreV1Api(bed.api_client).delete_namespace(ns)
    medians = {label: statistics.median(s) for label, s in results.items()}
    multus = medians["Multus thick (multus-shim + multus-daemon)"]
    print(
        f"median ADD+DEL over {opts.cycles} cycles (ptp+host-local cluster network + one NAD, real API server):"
    )
    for label, value in medians.items():
        print(f"  {label:46s} {value:8.1f} ms   x{value / multus:.2f} of Multus")
    print("API requests per ADD+DEL cycle (audit log; informer lists/watches left out):")
    for label, calls in traffic.items():
        print(f"  {label:46s} {calls}")
    print("inside cni-shim-daemon (median per request, from its logs):")
    for label, value in daemon_side.items():
        print(f"  {label:46s} {value:8.1f} ms")
    print("shim process start-up (median CNI_COMMAND=VERSION):")
    print(f"  cni-shim    {startup_ms(bin_dir / 'cni-shim'):6.1f} ms")
    print(f"  multus-shim {startup_ms(bin_dir / 'multus-shim'):6.1f} ms")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
