"""Cluster scale (issue 34, spec 18.3): what node-0's driver and CNI daemon cost as the cluster grows.

    python -m bench.cluster [--nodes 10,100,1000] [--pods 32] [--operator 500x1000]

The API server is loaded with a simulated cluster of N other nodes, written directly through the
API, concurrently (no kubelet runs them): Node objects, 8 Pods of 8 VFs on each, their allocated
and reserved ResourceClaims, their shadows created through the driver's own code path
(bench.scale.create_shadows) with the managed labels and the node's UID, and a source NAD in each
namespace of 100 Pods. Node-0 (the bed's node) has a fixed load of its own, --pods Pods of 8 VFs.
The cluster grows in place from one N to the next; at each N:

- node-0's driver: its repair pass as the driver runs it (bench.scale.node_passes: the start-up
  pass and three steady ones in a child process of its own), requests by kind and bytes off the
  wire per pass, pass time, CPU, peak RSS. Per minute is two passes (the 30 s interval).
- node-0's cni-shim-daemon, the real process (testbed.cni_daemon.DaemonProc, NODE_NAME of
  node-0): start-up until ready (caches synced), bytes read (/proc/<pid>/io, less the bytes of
  the same daemon started without Kubernetes: its imports), RSS and CPU; then a steady window
  of WINDOW seconds during which 1 % of the other nodes' shadows and one Pod's shadows of
  node-0 change (a patched annotation each: one watch event to whoever watches them), with its
  bytes, CPU and RSS.
- the API server's audit log: every request of node-0's driver and daemon, by verb, in each part.

--operator PxN adds the operator's node-policy controller (bench.operator) at P policies on N nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client

from bench import operator as operator_bench
from bench.common import rss_kib, test_bed
from bench.scale import (
    CLUSTER_WIDE_CLAIMS,
    bindings_of,
    claim_record,
    create_claim,
    create_claims,
    create_pod,
    create_pods,
    create_shadows,
    parallel,
    run_child,
)
from sriov_contract.keys import MANAGED_BY_LABEL
from sriov_dra.core.claimrecord import encode
from sriov_dra.kube.resources import KubeNads
from sriov_dra.state.checkpoint import FileStorage
from testbed.bed import TestBed
from testbed.cni_daemon import DAEMON, DaemonProc
from testbed.tools import ToolSet

VFS = 8
PODS_PER_NODE = 8
PODS_PER_NAMESPACE = 100
WINDOW = 20.0
CHURN_SHARE = 0.01
NODE0_PODS = 32
FULL_SERIES = (10, 100, 1000)
# make bench's default: two points, about two minutes; quick: one point.
DEFAULT_SERIES = (10, 50)
QUICK_SERIES = (5,)
NAD_API = ("k8s.cni.cncf.io", "v1")
NADS = "network-attachment-definitions"
SOURCE_CONFIG = json.dumps(
    {"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov", "ipam": {"type": "static"}}
)


class Cluster:
    """The simulated other nodes, grown in place."""

    def __init__(self, api: client.ApiClient, tag: str) -> None:
        self.api = api
        self.tag = tag
        self.nodes = 0
        self.namespaces: set[str] = set()
        self.shadows: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def grow(self, nodes: int) -> float:
        """Up to `nodes` other nodes; returns the seconds it took."""
        start = time.perf_counter()
        first = self.nodes
        for ns in sorted({self._namespace(i * PODS_PER_NODE) for i in range(first, nodes)} - self.namespaces):
            self._create_namespace(ns)
        parallel(self._node, range(first, nodes))
        self.nodes = nodes
        return time.perf_counter() - start

    def _namespace(self, pod_index: int) -> str:
        return f"bench-cluster-{self.tag}-{pod_index // PODS_PER_NAMESPACE}"

    def _create_namespace(self, ns: str) -> None:
        client.CoreV1Api(self.api).create_namespace(
            client.V1Namespace.model_validate({"metadata": {"name": ns}})
        )
        source = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
                  "metadata": {"name": "rail-a"}, "spec": {"config": SOURCE_CONFIG}}  # fmt: skip
        client.CustomObjectsApi(self.api).create_namespaced_custom_object(*NAD_API, ns, NADS, source)
        self.namespaces.add(ns)

    def _node(self, index: int) -> None:
        core, objs, nads = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api), KubeNads(self.api)
        name = f"bench-cluster-{self.tag}-n{index:04d}"
        node = core.create_node(
            client.V1Node.model_validate({"metadata": {"name": name, "labels": {"bench": self.tag}}})
        )
        assert node.metadata is not None
        node_uid = str(node.metadata.uid)
        made = []
        for i in range(index * PODS_PER_NODE, (index + 1) * PODS_PER_NODE):
            pod = create_pod(core, self._namespace(i), name, i)
            claim_uid = create_claim(objs, name, pod, i, VFS)
            record = create_shadows(nads, claim_record((name, node_uid), pod, claim_uid, i, VFS), node_uid)
            made += [(pod[0], b.shadow_name) for b in bindings_of(record, node_uid)]
        with self._lock:
            self.shadows += made

    def remove(self) -> None:
        """Namespaces and Nodes deleted (no driver runs for these nodes to release the shadows)."""
        core = client.CoreV1Api(self.api)
        for ns in sorted(self.namespaces):
            remove_namespace(self.api, ns)
        for node in core.list_node(label_selector=f"bench={self.tag}").items:
            assert node.metadata is not None
            core.delete_node(str(node.metadata.name))


def remove_namespace(api: client.ApiClient, ns: str) -> None:
    """The namespace deleted, its shadows' finalizers dropped first (no driver releases them here)."""
    objs = client.CustomObjectsApi(api)
    listed: dict[str, Any] = objs.list_namespaced_custom_object(  # type: ignore[assignment]
        *NAD_API, ns, NADS, label_selector=MANAGED_BY_LABEL
    )
    drop = [{"op": "remove", "path": "/metadata/finalizers"}]
    names = [o["metadata"]["name"] for o in listed["items"] if o["metadata"].get("finalizers")]
    nads = KubeNads(api)
    parallel(lambda n: nads.patch_nad(ns, n, drop), names)
    client.CoreV1Api(api).delete_namespace(ns)


def _churn(api: client.ApiClient, shadows: Sequence[tuple[str, str]], seconds: float) -> int:
    """Each shadow's annotation patched once, spread over `seconds` (one MODIFIED event each)."""
    objs = client.CustomObjectsApi(api)
    if not shadows:
        return 0
    gap = seconds / len(shadows)
    start = time.monotonic()

    def patch(i: int) -> None:
        delay = start + i * gap - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        ns, name = shadows[i]
        objs.patch_namespaced_custom_object(
            *NAD_API, ns, NADS, name, {"metadata": {"annotations": {"bench/churn": f"{i}-{start}"}}}
        )

    parallel(patch, range(len(shadows)))
    return len(shadows)


def _proc_io(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _hwm_mib(pid: int) -> float:
    """Peak RSS of a live process (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def _daemon(
    work: Path, kubeconfig: Path | None, node_name: str, executable: Path = DAEMON
) -> Iterator[DaemonProc]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env["NODE_NAME"] = node_name
    work.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {"cniDir": str(work / "cache")}
    if kubeconfig is not None:
        config["kubeconfig"] = str(kubeconfig)
    daemon = DaemonProc(work, config, env, executable)
    try:
        yield daemon.start(timeout=120)
    finally:
        daemon.stop()


def _changed(before: dict[str, str], after: dict[str, str], shadows: Sequence[tuple[str, str]]) -> int:
    """How many of `shadows` the daemon's cache holds at a newer version than before."""
    keys = [f"{ns}/{name}" for ns, name in shadows]
    return sum(1 for k in keys if k in after and after[k] != before.get(k))


def _audit_counts(bed: TestBed, since: int, user: str) -> dict[str, int]:
    return dict(Counter(f"{e.verb} {e.resource}" for e in bed.audit.events(since=since) if e.user == user))


def measure_daemon(
    bed: TestBed,
    executable: Path,
    cluster: Cluster,
    own: Sequence[tuple[str, str]],
    work: Path,
    kubeconfig: Path,
    user: str,
) -> dict[str, Any]:
    with _daemon(work / "offline", None, bed.node_name, executable) as offline:
        assert offline.proc is not None
        import_bytes = _proc_io(offline.proc.pid)
    mark = bed.audit.mark()
    start = time.perf_counter()
    with _daemon(work / "daemon", kubeconfig, bed.node_name, executable) as daemon:
        assert daemon.proc is not None
        pid = daemon.proc.pid
        ready = time.perf_counter() - start
        held = daemon.informers()
        startup = {
            "seconds": ready,
            "bytes": _proc_io(pid) - import_bytes,
            "cpu_seconds": _cpu_seconds(pid),
            "rss_mib": rss_kib(pid) / 1024,
            "peak_rss_mib": _hwm_mib(pid),
            "nads_held": len(held.get("nad", {})),
            "audit": _audit_counts(bed, mark, user),
        }
        mark = bed.audit.mark()
        io, cpu = _proc_io(pid), _cpu_seconds(pid)
        before = held.get("nad", {})
        others = cluster.shadows[:: max(1, round(1 / CHURN_SHARE))]
        changed = [0, 0]
        threads = [
            threading.Thread(target=lambda: changed.__setitem__(0, _churn(cluster.api, others, WINDOW))),
            threading.Thread(target=lambda: changed.__setitem__(1, _churn(cluster.api, own[:VFS], WINDOW))),
        ]
        begun = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(max(0.0, WINDOW - (time.monotonic() - begun)) + 2.0)  # the last events delivered
        elapsed = time.monotonic() - begun
        steady = {
            "window_seconds": elapsed,
            "changed_elsewhere": changed[0],
            "changed_here": changed[1],
            "bytes_per_min": (_proc_io(pid) - io) * 60 / elapsed,
            "cpu_seconds_per_min": (_cpu_seconds(pid) - cpu) * 60 / elapsed,
            "rss_mib": rss_kib(pid) / 1024,
            "audit": _audit_counts(bed, mark, user),
            "seen_here": _changed(before, daemon.informers().get("nad", {}), own[:VFS]),
        }
    return {"startup": startup, "steady": steady}


def measure_driver(
    bed: TestBed, checkpoint: Path, node_uid: str, kubeconfig: Path, user: str, *, before: bool = False
) -> dict[str, Any]:
    """node-0's repair passes; `before`: with the cluster-wide claim listing of before issue 34."""
    mark = bed.audit.mark()
    if before:
        os.environ[CLUSTER_WIDE_CLAIMS] = "1"
    try:
        passes = run_child("node-passes", kubeconfig, checkpoint, node_uid)
    finally:
        os.environ.pop(CLUSTER_WIDE_CLAIMS, None)
    passes["audit"] = _audit_counts(bed, mark, user)
    steady = passes["steady"]
    passes["per_min"] = {
        "requests": 2 * sum(p["requests_total"] for p in steady) / len(steady),
        "bytes": 2 * sum(p["bytes"] for p in steady) / len(steady),
    }
    return passes


def identity(bed: TestBed, name: str) -> tuple[Path, str]:
    """A client certificate of its own (system:masters), so the audit log tells the parts apart."""
    path = bed.issue_identity(name, name, ("system:masters",))
    return Path(path), name


def measure(
    bed: TestBed,
    series: Sequence[int],
    pods: int,
    work: Path,
    operator: tuple[int, int] | None = None,
    before: Path | None = None,
    *,
    clean_up: bool = True,
) -> dict[str, Any]:
    """The N series (and the operator); `before`: a cni-shim-daemon of the code before issue 34
    measured beside ours, and the driver's pass with the cluster-wide claim listing."""
    api = bed.api_client
    node = client.CoreV1Api(api).read_node(bed.node_name)
    assert node.metadata is not None
    node_uid = str(node.metadata.uid)
    tag = secrets.token_hex(2)
    owners = create_pods(api, bed.node_name, pods, f"n0{tag}")
    claim_uids = create_claims(api, bed.node_name, owners, VFS)
    nads = KubeNads(api)
    records = parallel(
        lambda i: create_shadows(
            nads, claim_record((bed.node_name, node_uid), owners[i], claim_uids[i], i, VFS), node_uid
        ),
        range(pods),
    )
    checkpoint = work / "checkpoint.json"
    FileStorage(checkpoint).write(encode({r.claim_uid: r for r in records}))
    own = [(r.namespace, b.shadow_name) for r in records for b in bindings_of(r, node_uid)]
    driver_config, driver_user = identity(bed, f"bench-node0-driver-{tag}")
    daemon_config, daemon_user = identity(bed, f"bench-node0-daemon-{tag}")
    cluster = Cluster(api, tag)
    out: dict[str, Any] = {"node0_pods": pods, "vfs": VFS, "pods_per_node": PODS_PER_NODE, "series": []}
    try:
        for n in series:
            grown = cluster.grow(n)
            print(f"  N={n}: cluster grown in {grown:.0f} s", flush=True)
            point = {
                "nodes": n,
                "grow_seconds": grown,
                "shadows": n * PODS_PER_NODE * VFS + pods * VFS,
                "claims": n * PODS_PER_NODE + pods,
                "driver": measure_driver(bed, checkpoint, node_uid, driver_config, driver_user),
                "daemon": measure_daemon(
                    bed, DAEMON, cluster, own, work / f"n{n}", daemon_config, daemon_user
                ),
            }
            if before is not None:
                point["before"] = {
                    "driver": measure_driver(
                        bed, checkpoint, node_uid, driver_config, driver_user, before=True
                    ),
                    "daemon": measure_daemon(
                        bed, before, cluster, own, work / f"b{n}", daemon_config, daemon_user
                    ),
                }
            out["series"].append(point)
            report_point(point)
        if operator is not None:
            out["operator"] = operator_bench.measure(bed, *operator)
            operator_bench.report(out["operator"])
    finally:
        # Releasing 64,000 shadows takes a request each: a bed about to be thrown away skips it.
        if clean_up:
            cluster.remove()
            for ns in sorted({o[0] for o in owners}):
                remove_namespace(api, ns)
    return out


def report_point(p: dict[str, Any]) -> None:
    d, s = p["driver"], p["daemon"]
    steady = d["steady"]
    pass_s = sum(x["seconds"] for x in steady) / len(steady)
    print(
        f"  N={p['nodes']:5d} ({p['shadows']} shadows, {p['claims']} claims): driver "
        f"{d['per_min']['requests']:.0f} req/min, {d['per_min']['bytes'] / 1024:.0f} KiB/min, pass {pass_s * 1000:.0f} ms, "
        f"peak RSS {d['peak_rss_mib']:.0f} MiB; daemon start {s['startup']['seconds']:.1f} s "
        f"{s['startup']['bytes'] / 1024:.0f} KiB, RSS {s['steady']['rss_mib']:.0f} MiB, steady "
        f"{s['steady']['bytes_per_min'] / 1024:.0f} KiB/min, {sum(s['steady']['audit'].values())} requests "
        f"in {s['steady']['window_seconds']:.0f} s, holds {s['startup']['nads_held']} NADs",
        flush=True,
    )


def report(r: dict[str, Any]) -> None:
    print(
        f"cluster scale: node-0 with {r['node0_pods']} Pods x {r['vfs']} VFs; other nodes {r['pods_per_node']} Pods x {r['vfs']} VFs each"
    )
    for p in r["series"]:
        report_point(p)
    if "operator" in r:
        operator_bench.report(r["operator"])


def shared_bed() -> bool:
    """Whether the bed outlives the run (TESTBED_STATE names one): then the cluster is removed."""
    return bool(os.environ.get("TESTBED_STATE"))


def series(text: str, quick: bool) -> list[int]:
    """The N series from "10,100,1000"; empty: the default (quick) one; "0": none (the operator alone)."""
    if text.strip() == "0":
        return []
    chosen = [int(n) for n in text.split(",") if n.strip()]
    return chosen or list(QUICK_SERIES if quick else DEFAULT_SERIES)


def operator_size(text: str) -> tuple[int, int] | None:
    """(policies, nodes) from "500x1000"; empty: no operator part."""
    if not text:
        return None
    policies, nodes = (int(x) for x in text.split("x"))
    return policies, nodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--nodes", default=",".join(map(str, FULL_SERIES)), help="the N series, grown in place"
    )
    parser.add_argument("--pods", type=int, default=NODE0_PODS, help="node-0's Pods of 8 VFs each")
    parser.add_argument("--operator", default="", help="PxN: the operator at P policies on N nodes")
    parser.add_argument("--json", default="", help="write the result here too")
    parser.add_argument(
        "--before", default="", help="a checkout of the code before issue 34 (its .venv's cni-shim-daemon)"
    )
    opts = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-cluster-", dir="/var/tmp") as work,
        test_bed(ToolSet()) as bed,
    ):
        before = Path(opts.before) / ".venv" / "bin" / "cni-shim-daemon" if opts.before else None
        result = measure(
            bed,
            series(opts.nodes, False),
            opts.pods,
            Path(work),
            operator_size(opts.operator),
            before,
            clean_up=shared_bed(),
        )
    report(result)
    if opts.json:
        Path(opts.json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
