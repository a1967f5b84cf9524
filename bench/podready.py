"""Pod-ready latency on the real kubelet: an eight-pair Pod through DRA and cni-shim thick, against
the same interfaces from a hand-written networks annotation and static NADs through Multus thick
(issue 36, item 3).

    python -m bench.podready [--cycles 10]

One node: the eight-pair fake node (fixtures/topologies/eight-pair.yaml) on the real scheduler,
kubelet and containerd (testbed.stack.Stack, thick). The node holds one eight-pair Pod (eight
GPUs), so each cycle creates one Pod, waits until it is Ready, deletes it and waits until it is
gone; the two sides take turns (ours, baseline, ours, ...) after one warm-up cycle each, so
machine drift hits both.

- Ours: spec 14.2's objects grown to eight rails (testbed.workloads.eight_pairs_workload): a
  ResourceClaimTemplate of eight GPU/NIC pairs, our driver preparing them and writing the managed
  shadows, cni-shim thick with live reads running the eight VFs' delegates at once.
- Baseline: no DRA and no GPU claim; eight static NADs (the sriov test plugin with a fixed
  ``deviceID``, one VF per rail, and the same whereabouts IPAM per rail), the Pod naming them in
  its ``k8s.v1.cni.cncf.io/networks`` annotation, and the node's CNI switched to Multus thick:
  a multus-shim conf sorted before ours in the node's conf dir and multus-daemon on the bed.
  containerd's CRI plugin reloads the conf dir; the bench waits until ``crictl info`` shows the
  conf it wants before each Pod, and afterwards checks which daemon answered each Pod's ADD.

Creation to Ready is the client's monotonic time from the create call to the watch event that
shows ``Ready=True``. Where the time goes, in seconds after the create call: scheduling (the
watch's PodScheduled), NodePrepareResources (the kubelet's log), the sandbox (containerd's
RunPodSandbox, CNI ADD included), the CNI ADD inside it (cni-shim-daemon's ``ADD ok`` seconds;
multus-daemon's own request log), and the container's create and start (containerd's log).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import math
import os
import queue
import re
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from bench.common import standalone
from bench.thick_compare import multus_daemon
from sriov_dra.model import DRIVER_NAME
from testbed import realnode
from testbed.bed import TestBed
from testbed.fakenode import FakeNode, load_topology_file
from testbed.nodecni import answers_in
from testbed.scenario import apply_workload, remove_workload, stop_pod
from testbed.stack import Stack
from testbed.tools import ToolSet
from testbed.waiting import wait_for
from testbed.workloads import WORKLOAD_NS, Workload, eight_pairs_workload, rail_sriov_conf

REPO = Path(__file__).resolve().parents[1]
EIGHT_PAIR = REPO / "fixtures" / "topologies" / "eight-pair.yaml"
OURS = "cni-shim thick + DRA"
BASELINE = "Multus thick, static NADs"
SIDES = (OURS, BASELINE)
# Sorted before the node's own 00-auto-sriov.conf: containerd loads only the first conf.
MULTUS_CONF = "00-0-multus.conf"
STATIC_PREFIX = "static-"
READY_TIMEOUT = 180.0
SPANS = ("scheduled", "prepare", "sandbox", "cni_add", "container", "ready")


# -- the pure part: statistics, watch events, log lines --------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of a non-empty sample."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def latency(samples: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max (nearest rank; with ten samples p99 is the max), mean and count."""
    return {
        "n": len(samples),
        "p50": percentile(samples, 50),
        "p99": percentile(samples, 99),
        "max": max(samples),
        "mean": statistics.fmean(samples),
    }


def first_true(events: Sequence[tuple[float, Mapping[str, Any]]], condition: str) -> float | None:
    """The time of the first watch event whose Pod shows ``condition`` True."""
    for at, pod in events:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == condition and cond.get("status") == "True":
                return at
    return None


_LOGRUS_TIME = re.compile(r'^time="([^"]+)"')


def _iso_epoch(text: str) -> float:
    """RFC 3339 with up to nanoseconds (Python parses microseconds) to epoch seconds."""
    main, _, rest = text.partition(".")
    if rest:
        digits = re.match(r"\d+", rest)
        frac = digits.group(0) if digits else ""
        zone = rest[len(frac) :]
        text = f"{main}.{frac[:6].ljust(6, '0')}{zone}"
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def containerd_marks(log: str, pod_uid: str) -> dict[str, float]:
    """From containerd's log (logrus text), epoch seconds of one Pod's sandbox and container: the
    RunPodSandbox call and its return, the container's CreateContainer call and the StartContainer
    return. Keys are absent where the log has no such line."""
    marks: dict[str, float] = {}
    sandbox = container = ""
    for line in log.splitlines():
        found = _LOGRUS_TIME.match(line)
        if not found:
            continue
        # The sandbox's metadata prints as Uid:<uid>, (gogo) or uid:\"<uid>\" (protobuf-go).
        if pod_uid in line and "RunPodSandbox for" in line:
            returned = re.search(r'returns sandbox id \\"(\w+)\\"', line)
            if returned:
                sandbox = returned.group(1)
                marks["sandbox_end"] = _iso_epoch(found.group(1))
            else:
                marks.setdefault("sandbox_start", _iso_epoch(found.group(1)))
        elif sandbox and f'CreateContainer within sandbox \\"{sandbox}\\"' in line:
            returned = re.search(r'returns container id \\"(\w+)\\"', line)
            if returned:
                container = returned.group(1)
            else:
                marks.setdefault("container_start", _iso_epoch(found.group(1)))
        elif container and f'StartContainer for \\"{container}\\" returns successfully' in line:
            marks["container_end"] = _iso_epoch(found.group(1))
    return marks


_KLOG = re.compile(r"^[IWE](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+)")


def klog_epoch(line: str, year: int) -> float | None:
    """A klog line's time (UTC on the bed; klog prints no year) as epoch seconds."""
    found = _KLOG.match(line)
    if not found:
        return None
    month, day, clock = found.groups()
    return datetime.datetime.fromisoformat(f"{year}-{month}-{day}T{clock}+00:00").timestamp()


def prepare_window(log: str, since: float, until: float, driver: str) -> tuple[float, float] | None:
    """The kubelet's first NodePrepareResources call to ``driver`` in [since, until] and the end of
    the last, as epoch seconds (the kubelet logs both at -v=4)."""
    year = datetime.datetime.fromtimestamp(since, datetime.UTC).year
    start = end = None
    marker = f'driverName="{driver}"'
    for line in log.splitlines():
        if marker not in line or "NodePrepareResources rpc" not in line:
            continue
        at = klog_epoch(line, year)
        if at is None or not since <= at <= until:
            continue
        if '"Calling NodePrepareResources rpc"' in line and start is None:
            start = at
        elif '"Done calling NodePrepareResources rpc"' in line:
            end = at
    return (start, end) if start is not None and end is not None else None


def shim_add_seconds(log: str, pod: str) -> float | None:
    """cni-shim-daemon's own time for the ADD of ``pod`` (namespace/name), from its JSON log."""
    for line in log.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("msg") == "ADD ok" and entry.get("pod") == pod:
            return float(entry["seconds"])
    return None


def multus_adds(log: str, namespace: str, name: str) -> int:
    """How many ADD requests of one Pod multus-daemon started, from its log (verbose logs each
    request's start and finish; in whole seconds in Multus v4.2, so only the marker of who
    answered, not a time). The runtime's CNI_ARGS come in any order."""
    pod = re.compile(
        rf"K8S_POD_NAMESPACE={re.escape(namespace)}[;\"].*K8S_POD_NAME={re.escape(name)}[;\"]"
        rf"|K8S_POD_NAME={re.escape(name)}[;\"].*K8S_POD_NAMESPACE={re.escape(namespace)}[;\"]"
    )
    return sum(
        1
        for line in log.splitlines()
        if "ADD starting CNI request" in line and pod.search(line.replace("\\", ""))
    )


def spans(sample: Mapping[str, Any]) -> dict[str, float]:
    """One Pod's marks as seconds after its create call: when each step ended (``scheduled``,
    ``ready``) or how long it took (``prepare``, ``sandbox``, ``cni_add``, ``container``)."""
    out: dict[str, float] = {}
    wall = sample["created_wall"]
    for key in ("scheduled", "ready"):
        if sample.get(key) is not None:
            out[key] = sample[key] - sample["created_mono"]
    marks = sample.get("containerd") or {}
    for key, (begin, end) in {
        "sandbox": ("sandbox_start", "sandbox_end"),
        "container": ("container_start", "container_end"),
    }.items():
        if begin in marks and end in marks:
            out[key] = marks[end] - marks[begin]
            out[f"{key}_start_at"] = marks[begin] - wall
            out[f"{key}_end_at"] = marks[end] - wall
    if sample.get("prepare"):
        begin, end = sample["prepare"]
        out["prepare"] = end - begin
        out["prepare_start_at"] = begin - wall
    if sample.get("cni_add") is not None:
        out["cni_add"] = sample["cni_add"]
    return out


def span_summary(samples: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per span, its median and max over the Pods that have it."""
    per: dict[str, list[float]] = {}
    for sample in samples:
        for key, value in spans(sample).items():
            per.setdefault(key, []).append(value)
    return {key: {"median": statistics.median(v), "max": max(v), "n": len(v)} for key, v in per.items()}


def baseline_cni_add(ours: Mapping[str, Any], baseline: Mapping[str, Any]) -> float | None:
    """Multus's ADD inside the baseline's sandbox, median: its sandbox less what ours spent in the
    sandbox outside the CNI ADD (containerd's own part: netns, pause, the same on both sides).
    multus-daemon logs whole seconds only, too coarse to time its ADD directly."""
    try:
        return float(baseline["sandbox"]["median"] - (ours["sandbox"]["median"] - ours["cni_add"]["median"]))
    except KeyError:
        return None


# -- the imperative shell: the node, its two CNIs, the cycles ---------------------------------------


@dataclass
class Side:
    label: str
    samples: list[dict[str, Any]] = field(default_factory=list)


def static_nads(node: FakeNode, ipam: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One NAD per rail naming its first VF by ``deviceID``, with the rail's own whereabouts pool
    (the same network name and range as the managed shadows of that rail)."""
    out = []
    for pf in node.pfs:
        vf = node.rail_vfs(pf.rail)[0]
        conf = rail_sriov_conf(pf.rail, pf.subnet, ipam, deviceID=vf.pci)
        out.append(
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": f"{STATIC_PREFIX}{pf.rail}", "namespace": WORKLOAD_NS},
                "spec": {"config": json.dumps(conf)},
            }
        )
    return out


def baseline_pod(ours: Mapping[str, Any], nads: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Our Pod without its claim (so without GPUs), naming the static NADs on dra0..dra7."""
    pod = copy.deepcopy(dict(ours))
    pod["spec"].pop("resourceClaims", None)
    for container in pod["spec"]["containers"]:
        (container.get("resources") or {}).pop("claims", None)
    networks = ",".join(f"{n['metadata']['name']}@dra{i}" for i, n in enumerate(nads))
    pod["metadata"].setdefault("annotations", {})["k8s.v1.cni.cncf.io/networks"] = networks
    return pod


def named(pod: Mapping[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(pod))
    out["metadata"]["name"] = name
    # The workload's PID 1 ignores SIGTERM: a deletion would otherwise wait out the grace period.
    out["spec"]["terminationGracePeriodSeconds"] = 1
    return out


def _watch(
    api: client.ApiClient, name: str, version: str, into: queue.Queue[Any], stop: threading.Event
) -> None:
    core = client.CoreV1Api(api)
    stream = watch.Watch()
    try:
        for event in stream.stream(
            core.list_namespaced_pod,
            WORKLOAD_NS,
            field_selector=f"metadata.name={name}",
            resource_version=version,
            timeout_seconds=int(READY_TIMEOUT),
        ):
            into.put((time.monotonic(), event["raw_object"]))
            if stop.is_set():
                break
    except Exception as exc:  # handed to the waiting side, which raises it
        into.put(exc)
    finally:
        stream.stop()


def timed_start(stack: Stack, pod: Mapping[str, Any]) -> dict[str, Any]:
    """Create the Pod and follow it by a watch until Ready=True; the sample of marks."""
    api = stack.bed.api_client
    name = pod["metadata"]["name"]
    listed = client.CoreV1Api(api).list_namespaced_pod(WORKLOAD_NS, field_selector=f"metadata.name={name}")
    version = str(listed.metadata.resource_version)  # type: ignore[union-attr]
    events: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(api, name, version, events, stop), daemon=True)
    watcher.start()
    created_wall, created_mono = time.time(), time.monotonic()
    created = stack.cluster.create_pod(pod)
    seen: list[tuple[float, dict[str, Any]]] = []
    deadline = created_mono + READY_TIMEOUT
    try:
        while first_true(seen, "Ready") is None:
            item = events.get(timeout=max(0.1, deadline - time.monotonic()))
            if isinstance(item, Exception):
                raise item
            seen.append(item)
    except queue.Empty:
        raise TimeoutError(
            f"Pod {name} not Ready in {READY_TIMEOUT:.0f} s: {stack.kubelet.start_errors(name)}"
        ) from None
    finally:
        stop.set()
    return {
        "name": name,
        "uid": created["metadata"]["uid"],
        "created_wall": created_wall,
        "created_mono": created_mono,
        "ready_wall": created_wall + (first_true(seen, "Ready") or created_mono) - created_mono,
        "scheduled": first_true(seen, "PodScheduled"),
        "ready": first_true(seen, "Ready"),
    }


class NodeCniSwitch:
    """The node's CNI as containerd sees it: ours (cni-shim) or Multus thick's shim conf first."""

    def __init__(self, stack: Stack, multus_socket: Path) -> None:
        self.stack = stack
        self.conf = stack.cni.net_dir / MULTUS_CONF
        self.body = json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "multus-cni-network",
                "type": "multus-shim",
                "daemonSocketDir": str(multus_socket),
            }
        )

    def active_type(self) -> str:
        """The plugin type of the meta-plugin conf containerd has loaded (``crictl info``)."""
        info = json.loads(self.stack.node_runtime.crictl("info").stdout)
        cni = info.get("cniconfig") or (info.get("info") or {}).get("cniconfig") or {}
        # The first network is the loopback containerd adds; then the first conf of the dir.
        for network in cni.get("Networks") or []:
            source = json.loads(((network.get("Config") or {}).get("Source")) or "{}")
            if source.get("name") == "multus-cni-network":
                plugins = source.get("plugins") or [source]
                return str(plugins[0].get("type"))
        return ""

    def use(self, side: str) -> None:
        if side == BASELINE:
            scratch = self.conf.with_suffix(".tmp")
            scratch.write_text(self.body)
            scratch.rename(self.conf)  # one event: the conf dir never lacks a meta-plugin
        else:
            self.conf.unlink(missing_ok=True)
        wanted = "multus-shim" if side == BASELINE else "cni-shim"
        wait_for(lambda: self.active_type() == wanted, 30, what=f"containerd to load {wanted}", interval=0.1)


def cycle(stack: Stack, pod: dict[str, Any], side: str) -> dict[str, Any]:
    """One Pod created, Ready, deleted and gone; its stopped sandbox removed while its CNI is active."""
    sample = timed_start(stack, pod)
    sample["side"] = side
    if side == OURS:
        stop_pod(stack, pod)  # also waits until its generated claim is gone
    else:
        stack.cluster.delete_pod(WORKLOAD_NS, pod["metadata"]["name"])
    node = stack.node_runtime
    wait_for(
        lambda: all(s.get("state") != "SANDBOX_READY" for s in node.sandboxes(sample["uid"])),
        60,
        what=f"the sandbox of {pod['metadata']['name']} stopped",
        interval=0.2,
    )
    # containerd runs the CNI DEL again when it removes a sandbox: through the same CNI.
    node.remove_stopped_sandboxes()
    return sample


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def annotate(stack: Stack, side: Side, multus_log: str) -> None:
    """Add what the logs say to each sample: containerd's and the kubelet's marks, the CNI ADD,
    and which meta-plugin answered the ADD (the marker that the switch took)."""
    node = stack.node_runtime
    containerd_log, kubelet_log = _read(node.containerd_log), _read(node.kubelet_log)
    daemon = stack.cni.daemon
    shim_log = _read(daemon.log) if daemon is not None else ""
    for sample in side.samples:
        pod = f"{WORKLOAD_NS}/{sample['name']}"
        sample["containerd"] = containerd_marks(containerd_log, sample["uid"])
        sample["answered_by_cni_shim"] = answers_in(shim_log, "ADD", pod)
        sample["answered_by_multus"] = multus_adds(multus_log, WORKLOAD_NS, sample["name"])
        if side.label == OURS:
            sample["prepare"] = prepare_window(
                kubelet_log, sample["created_wall"] - 1, sample["ready_wall"] + 1, DRIVER_NAME
            )
            sample["cni_add"] = shim_add_seconds(shim_log, pod)


def measure(bed: TestBed, tools: ToolSet, work: Path, cycles: int, warmup: int = 1) -> dict[str, Any]:
    """``cycles`` Pods per side, alternating, after ``warmup`` each; latency and spans per side."""
    reason = realnode.unavailable_reason(tools)
    if reason:
        print(f"podready: not measured, the real kubelet cannot run here: {reason}")
        return {"skipped": reason}
    multus_dir = tools.require("multus")
    with Stack(bed, thick=True, topology=load_topology_file(EIGHT_PAIR)) as stack:
        workload = eight_pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
        nads = static_nads(stack.fake_node, stack.cni.whereabouts_ipam())
        with _workloads(stack, workload, nads), _multus(stack, multus_dir, work) as (switch, multus_log):
            sides = {label: Side(label) for label in SIDES}
            pods = {OURS: workload.pod, BASELINE: baseline_pod(workload.pod, nads)}
            prefix = {OURS: "eight-pairs", BASELINE: "static-eight"}
            for index in range(warmup + cycles):
                for label in SIDES:
                    switch.use(label)
                    sample = cycle(stack, named(pods[label], f"{prefix[label]}-{index}"), label)
                    if index >= warmup:
                        sides[label].samples.append(sample)
                    print(
                        f"  {label:28s} #{index}: Ready after {sample['ready'] - sample['created_mono']:.2f} s"
                    )
            switch.use(OURS)
            time.sleep(1.0)  # let multus-daemon's last log lines land
            for side in sides.values():
                annotate(stack, side, _read(multus_log))
            keep_logs(stack, multus_log)
        # Other work on the machine shares its cores with both sides alike; recorded beside them.
        return {**result(sides, cycles, warmup, tools.directories.get("multus")), "loadavg": os.getloadavg()}


def keep_logs(stack: Stack, multus_log: Path) -> None:
    """With BENCH_PODREADY_LOGS=<dir>: the node's logs the spans came from, kept for a closer look."""
    into = os.environ.get("BENCH_PODREADY_LOGS")
    if not into:
        return
    dest = Path(into)
    dest.mkdir(parents=True, exist_ok=True)
    node = stack.node_runtime
    daemon = stack.cni.daemon
    for path in (node.containerd_log, node.kubelet_log, multus_log, *([daemon.log] if daemon else [])):
        if path.exists():
            shutil.copy(path, dest / path.name)


@contextmanager
def _workloads(stack: Stack, workload: Workload, nads: list[dict[str, Any]]) -> Iterator[None]:
    apply_workload(stack, workload)
    stack.cluster.apply(nads)
    try:
        yield
    finally:
        stack.cluster.delete(nads)
        remove_workload(stack, workload)


@contextmanager
def _multus(stack: Stack, multus_dir: Path, work: Path) -> Iterator[tuple[NodeCniSwitch, Path]]:
    """multus-daemon on the node's CNI bin dir and cluster network, its shim in that bin dir; the
    node's CNI back to ours on exit."""
    shutil.copy(multus_dir / "multus-shim", stack.cni.bin_dir / "multus-shim")
    podnet = json.loads((stack.cni.net_dir / "10-podnet.conflist").read_text())
    primary = {"cniVersion": "1.0.0", "name": "podnet", **podnet["plugins"][0]}
    conf = {"binDir": str(stack.cni.bin_dir), "delegates": [primary], "cniDir": str(work / "multus-cache")}
    with multus_daemon(stack.bed, multus_dir, work, conf, log_level="verbose") as (socket_dir, _pid):
        switch = NodeCniSwitch(stack, socket_dir)
        try:
            yield switch, work / "multus-daemon.log"
        finally:
            switch.use(OURS)


def result(sides: Mapping[str, Side], cycles: int, warmup: int, multus: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {"cycles": cycles, "warmup": warmup, "sides": {}}
    for label, side in sides.items():
        ready = [s["ready"] - s["created_mono"] for s in side.samples]
        out["sides"][label] = {
            "ready_s": latency(ready),
            "spans_s": span_summary(side.samples),
            "answered_by": {
                "cni-shim-daemon": sum(1 for s in side.samples if s["answered_by_cni_shim"]),
                "multus-daemon": sum(1 for s in side.samples if s["answered_by_multus"]),
            },
            "samples": [{"name": s["name"], **spans(s)} for s in side.samples],
        }
    estimate = baseline_cni_add(out["sides"][OURS]["spans_s"], out["sides"][BASELINE]["spans_s"])
    if estimate is not None:
        out["sides"][BASELINE]["spans_s"]["cni_add_estimated"] = {"median": estimate}
    ours, base = out["sides"][OURS]["ready_s"], out["sides"][BASELINE]["ready_s"]
    out["ratio_p99"] = ours["p99"] / base["p99"]
    out["ratio_p50"] = ours["p50"] / base["p50"]
    out["multus"] = str(multus or "")
    return out


def report(res: Mapping[str, Any]) -> None:
    if "skipped" in res:
        print(f"Pod-ready latency: not measured ({res['skipped']})")
        return
    print(
        f"Pod creation -> Ready on the real kubelet, eight-pair Pod, {res['cycles']} per side alternating "
        f"(after {res['warmup']} warm-up each), seconds:"
    )
    print(
        f"  {'side':28s} {'p50':>6s} {'p99':>6s} {'max':>6s}  answered by (cni-shim-daemon / multus-daemon)"
    )
    for label, side in res["sides"].items():
        r, by = side["ready_s"], side["answered_by"]
        print(
            f"  {label:28s} {r['p50']:6.2f} {r['p99']:6.2f} {r['max']:6.2f}  "
            f"{by['cni-shim-daemon']} / {by['multus-daemon']}"
        )
    print(
        f"  ours / baseline: p50 x{res['ratio_p50']:.2f}, p99 x{res['ratio_p99']:.2f} (target p99 <= x1.00)"
    )
    print("where the time goes, median (max) seconds; *_at: start after the create call:")
    for label, side in res["sides"].items():
        parts = [
            f"{k} {v['median']:.3f}" + (f" ({v['max']:.3f})" if "max" in v else "")
            for k, v in sorted(side["spans_s"].items())
        ]
        print(f"  {label}: " + "; ".join(parts))
    print("  (the baseline's CNI ADD is estimated: its sandbox less ours outside the ADD)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=1)
    opts = parser.parse_args(argv)
    return standalone(
        "bench-podready-",
        lambda bed, tools, work: report(measure(bed, tools, work, opts.cycles, opts.warmup)),
    )


if __name__ == "__main__":
    sys.exit(main())
