"""Scale: many managed shadows on the real API server, the scans over them, and checkpoint costs.

    python -m bench.scale [--pods 1000] [--vfs 8]

Creates real Pods (so the garbage collector sees live owners) and, for each, one synthetic
prepared claim of --vfs VFs whose shadows are created through the driver's own code path
(sriov_dra.prepare.shadows.ensure_shadow over sriov_dra.kube.resources.KubeNads, concurrently like batched prepares).
Then, each in a child process so its peak RSS is its own:

- orphan scan (spec 8.5), as `sriov-dra orphans` runs it: the checkpoint decoded, one
  cluster-wide NAD list narrowed by the managed-by and node-UID labels and checked item by item
  as it streams in, each shadow correlated with its checkpoint record. A few claims are dropped
  from the checkpoint first, so the scan must report exactly their shadows as orphans.
- repair pass: the driver's own pass (sriov_dra.recovery.repair.RepairWorker over the ClaimRepairer that
  sriov_dra.app.wiring.repair_service builds on the live API), over real ResourceClaims (allocated and
  reserved for their Pods) and their Pods: each claim and Pod checked, each shadow verified, the
  Pod's selections and status.devices kept. Once without a listing (each claim, Pod and shadow
  read live: the per-claim path) and once with the pass's listings (this node's Pods, the claims,
  this node's shadows, the Node: a healthy claim costs no request of its own); every API request
  of the pass is counted by verb and resource. A first, unmeasured pass converges the Pods. With
  the listings, a last pass runs after the selections of a few Pods were removed behind the
  driver's back: those claims alone take the live path, and their Pods must select again.

Also the checkpoint: load time of the whole file and the cost of one binding mutation (fsync'd
atomic rewrite) with 128 bindings and at full scale. Cleanup releases every shadow through
request_shadow_deletion + finalize_released_shadow (timed too).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client
from kubernetes import config as kube_config

from bench.common import summary, test_bed
from sriov_contract.binding import SourceRef
from sriov_contract.identity import BindingIdentity
from sriov_contract.keys import NETWORKS_ANNOTATION, PROTOCOL_VERSION
from sriov_dra.cli.common import read_checkpoint
from sriov_dra.core.bindingrecord import PENDING, READY, BindingRecord
from sriov_dra.core.claimrecord import ClaimRecord, PreparedDevice, encode
from sriov_dra.core.shadowconfig import render_shadow_config
from sriov_dra.kube.resources import KubeNads, KubeShadowLister
from sriov_dra.kube.transport import list_streamed
from sriov_dra.model import DRIVER_NAME
from sriov_dra.prepare.shadows import ensure_shadow, finalize_released_shadow, request_shadow_deletion
from sriov_dra.recovery.listing import PassLister
from sriov_dra.recovery.orphans import scan
from sriov_dra.recovery.repair import RepairWorker
from sriov_dra.state.checkpoint import FileStorage, PreparedClaims
from testbed.bed import TestBed
from testbed.repair_service import in_process_service
from testbed.tools import ToolSet

WORKERS = 8
PODS_PER_NAMESPACE = 100
DROPPED_CLAIMS = 5
DRIFTED_PODS = 5
_T = TypeVar("_T")
_R = TypeVar("_R")


def parallel(fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(fn, items))


def _source_nad(namespace: str) -> dict[str, Any]:
    config = {"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov", "ipam": {"type": "static"}}
    return {
        "metadata": {
            "namespace": namespace,
            "name": "rail-a",
            "uid": str(uuid.uuid4()),
            "resourceVersion": "1",
        },
        "spec": {"config": json.dumps(config)},
    }


def device_name(index: int, vf: int) -> str:
    return f"vf-{index:04d}-{vf}"


def claim_record(
    node: tuple[str, str], pod: tuple[str, str, str], claim_uid: str, index: int, vfs: int
) -> ClaimRecord:
    """A prepared claim as managed prepare checkpoints it (Pending, frozen config, no shadow UID)."""
    node_name, node_uid = node
    namespace, pod_name, pod_uid = pod
    source_nad = _source_nad(namespace)
    meta = source_nad["metadata"]
    source = SourceRef(namespace, "rail-a", meta["uid"], meta["resourceVersion"])
    devices = []
    for vf in range(vfs):
        device = device_name(index, vf)
        pci = f"0000:{index % 256:02x}:{index // 256:02x}.{vf % 8}"
        binding = BindingRecord(
            phase=PENDING,
            identity=BindingIdentity(
                PROTOCOL_VERSION, node_uid, pod_uid, claim_uid, DRIVER_NAME, node_name, device
            ),
            node_name=node_name,
            pod_namespace=namespace,
            pod_name=pod_name,
            plan_index=vf + 1,
            interface=f"net{vf + 1}",
            pci_address=pci,
            source=source,
            config=render_shadow_config(source_nad, pci).config.decode(),
        )
        devices.append(
            PreparedDevice(
                request_names=("vf",),
                pool=node_name,
                device=device,
                pci_address=pci,
                cdi_device_ids=(f"k8s.{DRIVER_NAME}/claim={claim_uid}-{device}",),
                if_name=f"net{vf + 1}",
                managed_binding=binding.to_json(),
            )
        )
    return ClaimRecord(claim_uid, namespace, f"claim-{index:04d}", pod_uid, tuple(devices))


def bindings_of(record: ClaimRecord, node_uid: str) -> list[BindingRecord]:
    out = []
    for d in record.devices:
        b = d.managed_binding or {}
        src = b["source"]
        out.append(
            BindingRecord(
                phase=b["phase"],
                identity=BindingIdentity(
                    PROTOCOL_VERSION,
                    node_uid,
                    record.pod_uid,
                    record.claim_uid,
                    DRIVER_NAME,
                    d.pool,
                    d.device,
                ),
                node_name=b["nodeName"],
                pod_namespace=b["podNamespace"],
                pod_name=b["podName"],
                plan_index=b["planIndex"],
                interface=b["interface"],
                pci_address=d.pci_address,
                source=SourceRef(src["namespace"], src["name"], src["uid"], src["resourceVersion"]),
                config=b["config"],
                shadow_uid=b["shadowUID"],
            )
        )
    return out


def _no_forget(record: BindingRecord) -> BindingRecord:
    raise RuntimeError(f"shadow {record.shadow_name} vanished during the benchmark")


def create_pods(api: client.ApiClient, node_name: str, count: int, tag: str) -> list[tuple[str, str, str]]:
    core = client.CoreV1Api(api)
    namespaces = [
        f"bench-scale-{tag}-{i}" for i in range((count + PODS_PER_NAMESPACE - 1) // PODS_PER_NAMESPACE)
    ]
    for ns in namespaces:
        core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": ns}}))
    return parallel(
        lambda i: create_pod(core, namespaces[i // PODS_PER_NAMESPACE], node_name, i), range(count)
    )


def create_pod(core: client.CoreV1Api, namespace: str, node_name: str, index: int) -> tuple[str, str, str]:
    """Pod `index` bound to `node_name` (no kubelet runs it), naming claim `index` of its namespace;
    returns (namespace, name, UID)."""
    body = {
        "metadata": {"name": f"p{index:04d}"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "registry.invalid/none:0"}],
            "resourceClaims": [{"name": "vfs", "resourceClaimName": f"claim-{index:04d}"}],
        },
    }
    pod = core.create_namespaced_pod(namespace, client.V1Pod.model_validate(body))
    assert pod.metadata is not None
    return namespace, f"p{index:04d}", str(pod.metadata.uid)


CLAIMS = ("resource.k8s.io", "v1")


def create_claims(
    api: client.ApiClient, node_name: str, owners: Sequence[tuple[str, str, str]], vfs: int
) -> list[str]:
    """Each Pod's claim, allocated on this node and reserved for it as the scheduler leaves it;
    returns the claim UIDs."""
    objs = client.CustomObjectsApi(api)
    return parallel(lambda i: create_claim(objs, node_name, owners[i], i, vfs), range(len(owners)))


def create_claim(
    objs: client.CustomObjectsApi, node_name: str, owner: tuple[str, str, str], index: int, vfs: int
) -> str:
    """Claim `index` in its Pod's namespace, allocated `vfs` devices of `node_name`'s pool and
    reserved for the Pod; returns its UID."""
    ns, pod_name, pod_uid = owner
    request = {"name": "vf", "exactly": {"deviceClassName": "bench-scale-vf", "count": vfs}}
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"claim-{index:04d}"},
        "spec": {"devices": {"requests": [request]}},
    }
    made: dict[str, Any] = objs.create_namespaced_custom_object(  # type: ignore[assignment]
        *CLAIMS, ns, "resourceclaims", body
    )
    results = [
        {"request": "vf", "driver": DRIVER_NAME, "pool": node_name, "device": device_name(index, vf)}
        for vf in range(vfs)
    ]
    made["status"] = {
        "allocation": {"devices": {"results": results}},
        "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
    }
    objs.replace_namespaced_custom_object_status(
        *CLAIMS, ns, "resourceclaims", made["metadata"]["name"], made
    )
    return str(made["metadata"]["uid"])


def create_shadows(nads: KubeNads, record: ClaimRecord, node_uid: str) -> ClaimRecord:
    """The record's shadows created through the driver's own code path; the record as it stands
    once they exist (Ready, with their UIDs)."""
    uids = {b.identity.device: ensure_shadow(nads, b, _no_forget) for b in bindings_of(record, node_uid)}
    return _with_uids(record, uids)


def _with_uids(record: ClaimRecord, uids: Mapping[str, str]) -> ClaimRecord:
    """The record as it stands once every shadow exists and the Pod names them (Ready)."""
    devices = tuple(
        replace(d, managed_binding={**(d.managed_binding or {}), "phase": READY, "shadowUID": uids[d.device]})
        for d in record.devices
    )
    return replace(record, devices=devices)


# -- the child-process measurements -------------------------------------------------------------


class CheckpointReader:
    """read_checkpoint, as `sriov-dra orphans` reads the checkpoint: decoded once, not copied
    record by record. Records the time it took and the peak RSS once it was done."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds = 0.0
        self.rss_kib = 0

    def __call__(self) -> list[ClaimRecord]:
        start = time.perf_counter()
        records = read_checkpoint(self.path)
        self.seconds += time.perf_counter() - start
        self.rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return records


def orphan_scan(api: client.ApiClient, node_uid: str, read: CheckpointReader) -> dict[str, Any]:
    """The driver's own scan (sriov_dra.recovery.orphans) as `sriov-dra orphans` runs it: the same lister,
    the checkpoint read once the listing has started."""
    reports = scan(KubeShadowLister(api), read, node_uid)
    orphans = sum(1 for r in reports if r.orphan)
    return {
        "listed": len(reports),
        "owned": len(reports) - orphans,
        "orphans": orphans,
        "code": "sriov_dra.recovery.orphans.scan",
    }


class RequestCounter:
    """Every API request of the client, by verb and resource (a wrapper around call_api), and the
    bytes its answers took on the wire (gzip'd where the server compressed them)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.counts: dict[str, int] = {}
        self._answers: list[Any] = []
        self._call = api.call_api
        api.call_api = self  # type: ignore[method-assign]

    def __call__(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        key = request_kind(method, url)
        self.counts[key] = self.counts.get(key, 0) + 1
        answer = self._call(method, url, *args, **kwargs)
        self._answers.append(answer)
        return answer

    def clear(self) -> None:
        self.counts.clear()
        self._answers.clear()

    def wire_bytes(self) -> int:
        """Body bytes read so far off the wire of every answer counted (urllib3's tell())."""
        return sum(int(getattr(getattr(a, "response", None), "tell", lambda: 0)()) for a in self._answers)


def request_kind(method: str, url: str) -> str:
    """ "get pods", "list network-attachment-definitions", "patch resourceclaims/status"..."""
    parts = url.split("?", maxsplit=1)[0].split("://", 1)[-1].split("/")[1:]
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if parts[:1] == ["namespaces"] and len(parts) > 2:
        parts = parts[2:]
    named = len(parts) > 1
    verb = {"GET": "get" if named else "list"}.get(method, method.lower())
    return f"{verb} {parts[0]}{'/' + parts[2] if len(parts) > 2 else ''}"


def _repair_pass(
    listed: bool, api: client.ApiClient, node_uid: str, read: CheckpointReader
) -> dict[str, Any]:
    """The driver's repair pass (RepairWorker over repair_service's ClaimRepairer), timed after
    one unmeasured pass; `listed` takes the pass's listings, else each claim takes the live path."""
    records = read()
    first = (records[0].devices[0].managed_binding or {}) if records else {}
    work = Path(tempfile.mkdtemp(prefix="bench-repair-"))
    repairer, lister, checkpoint = in_process_service(
        api, read.path, str(first.get("nodeName", "")), node_uid, work
    )
    listing = lister.list_for_pass if listed else None
    worker = RepairWorker(repairer, checkpoint.snapshot_all, listing=listing)
    worker.run_once()
    counter = RequestCounter(api)
    start, cpu = time.perf_counter(), time.process_time()
    outcomes = worker.run_once()
    result = {
        "pass_seconds": time.perf_counter() - start,
        "pass_cpu_seconds": time.process_time() - cpu,
        "claims": len(outcomes),
        "failed": sorted({why for why in outcomes.values() if why}),
        "requests": dict(sorted(counter.counts.items())),
        "requests_total": sum(counter.counts.values()),
    }
    if listed:
        result["drifted"] = _drifted_pass(api, worker, records[:DRIFTED_PODS], counter)
    return result


def _drifted_pass(
    api: client.ApiClient, worker: RepairWorker, drifted: Sequence[ClaimRecord], counter: RequestCounter
) -> dict[str, Any]:
    """A pass after `drifted`'s Pods lost their network selections: only they take the live path."""
    core = client.CoreV1Api(api)
    pods = [(r.namespace, str((r.devices[0].managed_binding or {})["podName"])) for r in drifted]
    remove = [{"op": "remove", "path": "/metadata/annotations/" + NETWORKS_ANNOTATION.replace("/", "~1")}]
    for ns, name in pods:
        core.patch_namespaced_pod(name, ns, remove)
    counter.clear()
    start = time.perf_counter()
    outcomes = worker.run_once()
    seconds = time.perf_counter() - start
    restored = [ns_name for ns_name in pods if NETWORKS_ANNOTATION in _annotations(core, *ns_name)]
    if len(restored) != len(pods) or any(outcomes.values()):
        raise SystemExit(f"repair of drifted Pods failed: {len(restored)}/{len(pods)} restored, {outcomes}")
    return {
        "claims": len(drifted),
        "pass_seconds": seconds,
        "requests": dict(sorted(counter.counts.items())),
        "requests_total": sum(counter.counts.values()),
    }


def _annotations(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, str]:
    meta = core.read_namespaced_pod(name, namespace).metadata
    return dict((meta.annotations if meta is not None else None) or {})


def repair_pass_get(api: client.ApiClient, node_uid: str, read: CheckpointReader) -> dict[str, Any]:
    return _repair_pass(False, api, node_uid, read)


def repair_pass_list(api: client.ApiClient, node_uid: str, read: CheckpointReader) -> dict[str, Any]:
    return _repair_pass(True, api, node_uid, read)


STEADY_PASSES = 3
# Set: the pass lists every claim of the cluster, as it did before issue 34 (a "before" figure).
CLUSTER_WIDE_CLAIMS = "BENCH_CLAIMS_CLUSTER_WIDE"


class ClaimsEverywhere:
    """The claim listing before issue 34: one cluster-wide list whatever the namespace."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def list_claims(self, namespace: str) -> Iterator[dict[str, Any]]:
        return list_streamed(self._api, "/apis/resource.k8s.io/v1/resourceclaims", "ResourceClaims", [])


def replace_claims(lister: PassLister, claims: ClaimsEverywhere) -> PassLister:
    # The bench's "before" figure only: no product code lists so, nor reads claims one by one then.
    lister._claims = claims
    lister._claim_reader = None
    return lister


def node_passes(api: client.ApiClient, node_uid: str, read: CheckpointReader) -> dict[str, Any]:
    """A node's repair as its driver runs it (the pass's listings, bench.cluster): the start-up
    pass, then STEADY_PASSES more, each counted (requests by kind, bytes off the wire) and timed."""
    records = read()
    first = (records[0].devices[0].managed_binding or {}) if records else {}
    work = Path(tempfile.mkdtemp(prefix="bench-node-"))
    repairer, lister, checkpoint = in_process_service(
        api, read.path, str(first.get("nodeName", "")), node_uid, work
    )
    if os.environ.get(CLUSTER_WIDE_CLAIMS):
        lister = replace_claims(lister, ClaimsEverywhere(api))
    worker = RepairWorker(repairer, checkpoint.snapshot_all, listing=lister.list_for_pass)
    counter = RequestCounter(api)
    passes = []
    for _ in range(1 + STEADY_PASSES):
        counter.clear()
        start, cpu = time.perf_counter(), time.process_time()
        outcomes = worker.run_once()
        passes.append(
            {
                "seconds": time.perf_counter() - start,
                "cpu_seconds": time.process_time() - cpu,
                "requests": dict(sorted(counter.counts.items())),
                "requests_total": sum(counter.counts.values()),
                "bytes": counter.wire_bytes(),
                "failed": sorted({why for why in outcomes.values() if why}),
                "claims": len(outcomes),
            }
        )
    return {"startup": passes[0], "steady": passes[1:]}


CHILD_TASKS: dict[str, Callable[[client.ApiClient, str, CheckpointReader], dict[str, Any]]] = {
    "orphan-scan": orphan_scan,
    "repair-pass-get": repair_pass_get,
    "repair-pass-list": repair_pass_list,
    "node-passes": node_passes,
}


def child(task: str, kubeconfig: str, checkpoint_path: str, node_uid: str, profile: bool) -> None:
    api = kube_config.new_client_from_config(config_file=kubeconfig)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    start, cpu_start = time.perf_counter(), time.process_time()
    read = CheckpointReader(Path(checkpoint_path))
    counts = CHILD_TASKS[task](api, node_uid, read)
    end = time.perf_counter()
    out = {
        "seconds": end - start,
        # Our own share (all threads): the rest of the wall time is the API server's, or waiting.
        "cpu_seconds": time.process_time() - cpu_start,
        "checkpoint_load_seconds": read.seconds,
        # Peak RSS with the checkpoint decoded (interpreter, client, records): the rest is the task's.
        "rss_before_task_mib": read.rss_kib / 1024,
        **counts,
    }
    if profiler is not None:
        profiler.disable()
        out["hottest"] = hottest(profiler)
    print(json.dumps(out))


def hottest(profiler: cProfile.Profile, count: int = 3) -> list[str]:
    """The functions with the most time of their own, as `file:line(name) seconds (calls)`."""
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:count]
    return [f"{Path(f).name}:{line}({name}) {v[2]:.2f} s ({v[1]} calls)" for (f, line, name), v in rows]


def run_child(
    task: str, kubeconfig: Path, checkpoint: Path, node_uid: str, *, profile: bool = False
) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its own peak RSS comes from wait4."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        os.execv(
            sys.executable,
            [
                sys.executable,
                "-m",
                "bench.scale",
                "--child",
                task,
                str(kubeconfig),
                str(checkpoint),
                node_uid,
                *(["--profile"] if profile else []),
            ],
        )
    os.close(w)
    with os.fdopen(r) as out:
        text = out.read()
    _, status, usage = os.wait4(pid, 0)
    if status != 0 or not text.strip():
        raise SystemExit(f"{task} child failed with status {status}")
    return {**json.loads(text.strip().splitlines()[-1]), "peak_rss_mib": usage.ru_maxrss / 1024}


def mutation_cost(records: Sequence[ClaimRecord], directory: Path, samples: int) -> dict[str, Any]:
    """One binding mutation (update_managed_bindings, fsync'd atomic rewrite) over `records`."""
    path = directory / f"checkpoint-{len(records)}.json"
    FileStorage(path).write(encode({r.claim_uid: r for r in records}))
    checkpoint = PreparedClaims(FileStorage(path), str(path))
    target = records[0]
    device = target.devices[0]
    times = []
    for i in range(samples):
        binding = {**(device.managed_binding or {}), "phase": READY if i % 2 else PENDING}
        start = time.perf_counter()
        checkpoint.update_managed_bindings(target.claim_uid, {device.device: binding})
        times.append((time.perf_counter() - start) * 1000)
    return {
        "bindings": sum(len(r.devices) for r in records),
        "file_bytes": path.stat().st_size,
        "mutation_ms": summary(times),
    }


def measure(bed: TestBed, pods: int, vfs: int, work: Path) -> dict[str, Any]:
    api = bed.api_client
    node = client.CoreV1Api(api).read_node(bed.node_name)
    assert node.metadata is not None
    node_uid = str(node.metadata.uid)
    tag = secrets.token_hex(2)
    start = time.perf_counter()
    owners = create_pods(api, bed.node_name, pods, tag)
    pods_seconds = time.perf_counter() - start
    start = time.perf_counter()
    claim_uids = create_claims(api, bed.node_name, owners, vfs)
    claims_seconds = time.perf_counter() - start
    records = [
        claim_record((bed.node_name, node_uid), pod, claim_uids[i], i, vfs) for i, pod in enumerate(owners)
    ]
    nads = KubeNads(api)
    start = time.perf_counter()
    records = parallel(lambda record: create_shadows(nads, record, node_uid), records)
    create_seconds = time.perf_counter() - start
    shadows = pods * vfs
    result: dict[str, Any] = {
        "pods": pods,
        "vfs_per_pod": vfs,
        "shadows": shadows,
        "pod_create_seconds": pods_seconds,
        "claim_create_seconds": claims_seconds,
        "shadow_create_seconds": create_seconds,
        "shadow_creates_per_second": shadows / create_seconds,
        "checkpoint_128": mutation_cost(records[: max(1, 128 // vfs)], work, 200),
        "checkpoint_full": mutation_cost(records, work, 10),
    }
    kubeconfig = bed.kubeconfig_for("admin")
    checkpoint = work / "checkpoint-scan.json"
    kept = records[DROPPED_CLAIMS:]
    FileStorage(checkpoint).write(encode({r.claim_uid: r for r in kept}))
    scanned = run_child("orphan-scan", kubeconfig, checkpoint, node_uid)
    if scanned["orphans"] != DROPPED_CLAIMS * vfs or scanned["owned"] != len(kept) * vfs:
        raise SystemExit(f"orphan scan miscounted: {scanned}; expected {DROPPED_CLAIMS * vfs} orphans")
    scanned["hottest"] = run_child("orphan-scan", kubeconfig, checkpoint, node_uid, profile=True)["hottest"]
    result["orphan_scan"] = scanned
    result["repair_pass"] = run_child("repair-pass-get", kubeconfig, checkpoint, node_uid)
    result["repair_pass_listed"] = run_child("repair-pass-list", kubeconfig, checkpoint, node_uid)

    def release(record: ClaimRecord) -> None:
        for b in bindings_of(record, node_uid):
            uid = request_shadow_deletion(nads, b)
            finalize_released_shadow(nads, b, uid)

    start = time.perf_counter()
    parallel(release, records)
    result["release_seconds"] = time.perf_counter() - start
    core = client.CoreV1Api(api)
    for ns in sorted({p[0] for p in owners}):
        core.delete_namespace(ns)
    return result


def report(r: Mapping[str, Any]) -> None:
    print(f"scale: {r['pods']} Pods x {r['vfs_per_pod']} VFs = {r['shadows']} shadows on the real API server")
    print(
        f"  shadow creates (ensure_shadow, {WORKERS} workers)  {r['shadow_create_seconds']:7.1f} s "
        f"({r['shadow_creates_per_second']:.0f}/s); Pods {r['pod_create_seconds']:.1f} s"
    )
    for key, what in (
        ("orphan_scan", "orphan scan (list + correlate)"),
        ("repair_pass", "repair pass (per-claim live reads)"),
        ("repair_pass_listed", "repair pass (one listing each)"),
    ):
        s = r[key]
        print(
            f"  {what:40s} {s['seconds']:7.2f} s ({s['cpu_seconds']:.2f} s our CPU), peak RSS "
            f"{s['peak_rss_mib']:.0f} MiB ({s['rss_before_task_mib']:.0f} with the checkpoint decoded, "
            f"which took {s['checkpoint_load_seconds'] * 1000:.0f} ms)"
        )
    for key in ("repair_pass", "repair_pass_listed"):
        s = r[key]
        print(
            f"  {key}: {s['claims']} claims, failed {s['failed']}; the pass alone {s['pass_seconds']:.2f} s "
            f"({s['pass_cpu_seconds']:.2f} s our CPU); {s['requests_total']} requests {s['requests']}"
        )
    d = r["repair_pass_listed"]["drifted"]
    print(
        f"  repair pass with {d['claims']} drifted Pods (selections removed): {d['pass_seconds']:.2f} s, "
        f"{d['requests_total']} requests {d['requests']}; every drifted Pod selects again"
    )
    for line in r["orphan_scan"].get("hottest", []):
        print(f"    hottest (cProfile, own time): {line}")
    print(
        f"  orphans found: {r['orphan_scan']['orphans']} of {r['orphan_scan']['listed']} listed (as planted), by {r['orphan_scan']['code']}"
    )
    for key in ("checkpoint_128", "checkpoint_full"):
        c = r[key]
        m = c["mutation_ms"]
        print(
            f"  checkpoint mutation, {c['bindings']:5d} bindings ({c['file_bytes'] / 1024:.0f} KiB): "
            f"median {m['median']:.1f} ms, p95 {m['p95']:.1f} ms"
        )
    print(f"  release of every shadow (delete + finalizer removal)  {r['release_seconds']:7.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--vfs", type=int, default=8)
    parser.add_argument("--child", nargs=4, metavar=("TASK", "KUBECONFIG", "CHECKPOINT", "NODE_UID"))
    parser.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.child:
        task, kubeconfig, checkpoint, node_uid = opts.child
        child(task, kubeconfig, checkpoint, node_uid, opts.profile)
        return 0
    # A real disk, not tmpfs: the checkpoint's cost is mostly fsync.
    with (
        tempfile.TemporaryDirectory(prefix="bench-scale-", dir="/var/tmp") as work,
        test_bed(ToolSet()) as bed,
    ):
        report(measure(bed, opts.pods, opts.vfs, Path(work)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
