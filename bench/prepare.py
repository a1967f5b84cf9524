"""Driver NodePrepareResources / NodeUnprepareResources latency, by phase, through gRPC.

    python -m bench.prepare [--sizes 1,8,32] [--repeats 5]

The real driver (sriov_dra.app.wiring.run, managed mode, repair worker and all) runs in this process on a
fake 40-VF node (fixtures/topologies/bench-40vf.yaml) against the test bed; a claim of N VFs is
allocated by the real scheduler through a DeviceClass whose VfConfig names the source NAD, and a
fake kubelet calls the driver over its real unix socket. Phase times come from timing wrappers
put around the driver's adapters for the duration of the run, counted only on the thread that
serves the measured call: API reads (claim, Pod, source NAD), render, VF driver (sysfs),
checkpoint writes (fsync'd), CDI files, binding Events, shadow creates (all of a claim's, made in
parallel, as the serving thread waits for them; or, on unprepare, shadow deletes and finalizer
patches), and the Pod patch; "other" is the rest of the time inside the driver
(planning, locks, logging). The round trip adds gRPC and the kubelet side.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import pstats
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

import sriov_dra.prepare.managed
import sriov_dra.prepare.shadows
from bench.common import standalone, summary
from sriov_dra.app import wiring
from sriov_dra.app.config import MULTUS, Config
from sriov_dra.kube import resources as kube
from sriov_dra.model import DRIVER_NAME
from sriov_dra.state import cdi, checkpoint
from sriov_dra.sysfs import vfdriver
from testbed.apiobjects import items_of
from testbed.bed import TestBed
from testbed.claims import allocated_claim, claim_ref, custom_objects
from testbed.fake_kubelet import FakeKubelet, wait_for_socket
from testbed.fakenode import FakeNode, load_topology_file
from testbed.tools import ToolSet
from testbed.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
TOPOLOGY = REPO / "fixtures" / "topologies" / "bench-40vf.yaml"
SOURCE_NAD = "rail-a-net"
GV = f"{DRIVER_NAME}/v1alpha1"
# (owner, attribute, phase) of every timed adapter call.
TIMED: Sequence[tuple[Any, str, str]] = (
    (kube.KubeClaims, "get_claim", "API reads"),
    (kube.KubePods, "get_pod", "API reads"),
    (kube.KubeNads, "get_nad", "API reads"),
    (kube.KubePolicySource, "node", "API reads"),
    (kube.KubeEvents, "create_event", "events"),
    (sriov_dra.prepare.managed, "render_shadow_config", "render"),
    (vfdriver.SysfsVfDriver, "bind", "VF driver"),
    (vfdriver.SysfsVfDriver, "restore", "VF driver"),
    (vfdriver.SysfsVfDriver, "verify_kernel_netdev", "VF driver"),
    (checkpoint.FileStorage, "write", "checkpoint"),
    (cdi.CdiDir, "write", "CDI"),
    (cdi.CdiDir, "remove", "CDI"),
    (kube.KubeNads, "create_nad", "shadow creates"),
    # A claim's shadows are ensured on worker threads: the serving thread's wait for them all.
    (sriov_dra.prepare.shadows, "_in_parallel", "shadow creates"),
    (kube.KubeNads, "delete_nad", "shadow deletes"),
    (kube.KubeNads, "patch_nad", "shadow finalizers"),
    (kube.KubePods, "patch_pod", "Pod patch"),
)


class PhaseClock:
    """Adds each timed call's duration to its phase, but only on a thread inside a scope; with a
    profiler, every scoped call runs under it (cProfile sees only the thread it is enabled on)."""

    def __init__(self) -> None:
        self._local = threading.local()
        self.last: dict[str, float] = {}
        self.profiler: cProfile.Profile | None = None

    def timed(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            spent: dict[str, float] | None = getattr(self._local, "spent", None)
            # A timed call inside another (a read inside an event, say) belongs to the outer phase.
            if spent is None or self._local.depth:
                return fn(*args, **kwargs)
            self._local.depth = 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - start
                self._local.depth = 0

        return wrapper

    def scope(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            spent: dict[str, float] = {}
            self._local.spent, self._local.depth = spent, 0
            start = time.perf_counter()
            profiler = self.profiler
            if profiler is not None:
                profiler.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                if profiler is not None:
                    profiler.disable()
                total = time.perf_counter() - start
                del self._local.spent
                spent["other"] = total - sum(spent.values())
                self.last = {**{k: v * 1000 for k, v in spent.items()}, "inside driver": total * 1000}

        return wrapper


@contextmanager
def instrumented() -> Iterator[PhaseClock]:
    clock = PhaseClock()
    originals = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in TIMED]
    scoped = [(sriov_dra.prepare.managed.ManagedPreparer, name) for name in ("prepare", "unprepare")]
    originals += [(owner, attr, getattr(owner, attr)) for owner, attr in scoped]
    try:
        for owner, attr, phase in TIMED:
            setattr(owner, attr, clock.timed(getattr(owner, attr), phase))
        for owner, attr in scoped:
            setattr(owner, attr, clock.scope(getattr(owner, attr)))
        yield clock
    finally:
        for owner, attr, original in reversed(originals):
            setattr(owner, attr, original)


def _namespace(bed: TestBed, prefix: str) -> str:
    return bed.create_namespace(f"{prefix}-{secrets.token_hex(3)}")


def setup_objects(bed: TestBed, node: FakeNode, policy_ns: str, workload_ns: str) -> str:
    """Policy advertising every VF, the source NAD and a DeviceClass naming it; returns the class."""
    device_class = f"bench-vf-{secrets.token_hex(3)}"
    sriov = {"cniVersion": "1.0.0", "name": SOURCE_NAD, "type": "sriov", "ipam": {"type": "static"}}
    bed.apply(
        [
            {
                "apiVersion": GV,
                "kind": "SriovResourcePolicy",
                "metadata": {"name": "bench", "namespace": policy_ns},
                "spec": {"configs": [{"resourceFilters": [{"pfNames": [node.pfs[0].netdev]}]}]},
            },
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": SOURCE_NAD, "namespace": workload_ns},
                "spec": {"config": json.dumps(sriov)},
            },
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": device_class},
                "spec": {
                    "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER_NAME}'"}}],
                    "config": [
                        {
                            "opaque": {
                                "driver": DRIVER_NAME,
                                "parameters": {
                                    "apiVersion": GV,
                                    "kind": "VfConfig",
                                    "netAttachDefName": SOURCE_NAD,
                                },
                            }
                        }
                    ],
                },
            },
        ]
    )
    return device_class


def advertised(bed: TestBed) -> int:
    slices = custom_objects(bed).list_cluster_custom_object(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        field_selector=f"spec.nodeName={bed.node_name},spec.driver={DRIVER_NAME}",
    )
    return sum(len(s["spec"].get("devices") or []) for s in items_of(slices))


def discard(bed: TestBed, ns: str, name: str) -> None:
    """Without a kubelet nothing ends the Pod: force it out, delete the claim, wait for its VFs."""
    client.CoreV1Api(bed.api_client).delete_namespaced_pod(name, ns, grace_period_seconds=0)
    custom_objects(bed).delete_namespaced_custom_object("resource.k8s.io", "v1", ns, "resourceclaims", name)

    def gone() -> bool:
        try:
            custom_objects(bed).get_namespaced_custom_object(
                "resource.k8s.io", "v1", ns, "resourceclaims", name
            )
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    wait_for(gone, 60, what=f"claim {ns}/{name} deleted")


def _checked(answer: Mapping[str, Any], uid: str, what: str) -> None:
    error = getattr(answer.get(uid), "error", "missing answer")
    if error:
        raise SystemExit(f"{what} of claim {uid} failed: {error}")


def hottest(profiler: cProfile.Profile, count: int = 12) -> list[str]:
    """The functions with the most time of their own, per call of the profiled operation."""
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:count]
    return [
        f"{Path(f).name}:{line}({name}) {v[2] * 1000:.1f} ms ({v[1]} calls)" for (f, line, name), v in rows
    ]


def measure(
    bed: TestBed, work: Path, sizes: Sequence[int], repeats: int, *, profile: int = 0
) -> dict[str, Any]:
    """`profile`: the claim size whose prepares also run under cProfile (0: none)."""
    node = FakeNode.up(load_topology_file(TOPOLOGY), work / "sysfs")
    stop = threading.Event()
    agent: threading.Thread | None = None
    kubelet: FakeKubelet | None = None
    try:
        policy_ns, workload_ns = _namespace(bed, "bench-drv"), _namespace(bed, "bench-prep")
        device_class = setup_objects(bed, node, policy_ns, workload_ns)
        dirs = {name: work / name for name in ("registry", "plugins", "cdi")}
        for d in dirs.values():
            d.mkdir()
        cfg = Config(
            node_name=bed.node_name,
            namespace=policy_ns,
            cdi_root=dirs["cdi"],
            registrar_dir=dirs["registry"],
            plugins_dir=dirs["plugins"],
            sysfs_root=node.sysfs_root,
            configuration_mode=MULTUS,
            multus_auto_attach=True,
            kubeconfig=str(bed.kubeconfig_for("admin")),
        )
        results: dict[str, Any] = {}
        with instrumented() as clock:
            agent = threading.Thread(target=wiring.run, args=(cfg, stop), name="driver", daemon=True)
            agent.start()
            kubelet = FakeKubelet(wait_for_socket(dirs["registry"], "-reg.sock", 60))
            kubelet.register()
            total = len(node.vfs)
            wait_for(lambda: advertised(bed) == total, 60, what=f"{total} VFs advertised")
            for size in sizes:
                runs: dict[str, list[dict[str, float]]] = {"prepare": [], "unprepare": []}
                profiler = cProfile.Profile() if size == profile else None
                for i in range(repeats):
                    name = f"c{size}-{i}"
                    ref = claim_ref(
                        allocated_claim(
                            bed, workload_ns, device_class, name, count=size, pod_name=name, timeout=120
                        )
                    )
                    for op, call in (("prepare", kubelet.prepare), ("unprepare", kubelet.unprepare)):
                        clock.profiler = profiler if op == "prepare" else None
                        start = time.perf_counter()
                        answer = call([ref])
                        elapsed = (time.perf_counter() - start) * 1000
                        _checked(answer, ref[2], op)
                        runs[op].append({**clock.last, "round trip": elapsed})
                    discard(bed, workload_ns, name)
                results[str(size)] = {
                    op: {key: summary([r.get(key, 0.0) for r in samples]) for key in samples[0]}
                    for op, samples in runs.items()
                }
                if profiler is not None:
                    results[str(size)]["prepare_profile"] = hottest(profiler)
        return {"repeats": repeats, "by_vfs": results}
    finally:
        if kubelet is not None:
            kubelet.close()
        stop.set()
        if agent is not None:
            agent.join(30)
        node.down()


def report(r: Mapping[str, Any]) -> None:
    print(
        f"driver prepare/unprepare through gRPC (median of {r['repeats']}, ms; real API server, fake sysfs):"
    )
    for size, ops in r["by_vfs"].items():
        for op in ("prepare", "unprepare"):
            phases = ops[op]
            trip = phases["round trip"]
            parts = ", ".join(
                f"{k} {v['median']:.1f}"
                for k, v in phases.items()
                if k not in ("round trip", "inside driver")
            )
            print(
                f"  {size:>2s} VF {op:9s} {trip['median']:7.1f} (p95 {trip['p95']:6.1f})  "
                f"inside driver {phases['inside driver']['median']:.1f}: {parts}"
            )
        for line in ops.get("prepare_profile", []):
            print(f"    {size} VF prepare, cProfile own time (all repeats): {line}")


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="1,8,32", help="VFs per claim, comma-separated (at most 40)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", type=int, default=0, help="profile the prepares of this claim size")
    opts = parser.parse_args(argv)
    sizes = [int(s) for s in opts.sizes.split(",")]

    def run(bed: TestBed, _tools: ToolSet, work: Path) -> None:
        # The in-process driver's routine warnings (watches cut at shutdown) are not results.
        logging.getLogger("driver").setLevel(logging.ERROR)
        report(measure(bed, work, sizes, opts.repeats, profile=opts.profile))

    return standalone("bench-prepare-", run)


if __name__ == "__main__":
    sys.exit(main_())
