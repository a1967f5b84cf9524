"""bench.podready's pure part: percentiles, watch conditions, the marks it reads from containerd's,
the kubelet's and the daemons' logs, and the spans and target row made of them."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from bench import podready as pr
from bench import report

UID = "4f1c2a9e-0000-4000-8000-000000000001"
SANDBOX = "a1b2c3"
CONTAINER = "d4e5f6"


def epoch(clock: str) -> float:
    return datetime.datetime.fromisoformat(f"2026-12-05T{clock}+00:00").timestamp()


def test_percentile_is_nearest_rank() -> None:
    samples = [float(v) for v in (7, 1, 10, 3, 5, 2, 9, 4, 6, 8)]
    assert pr.percentile(samples, 50) == 5.0
    assert pr.percentile(samples, 99) == 10.0  # with ten samples p99 is the max
    assert pr.percentile(samples, 10) == 1.0
    assert pr.percentile([4.2], 99) == 4.2


def test_latency_summary() -> None:
    got = pr.latency([2.0, 4.0, 6.0])
    assert got == {"n": 3, "p50": 4.0, "p99": 6.0, "max": 6.0, "mean": 4.0}


def pod(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}


def test_first_true_takes_the_first_event_with_the_condition_true() -> None:
    events = [
        (1.0, {"status": {}}),
        (1.2, pod(("PodScheduled", "True"), ("Ready", "False"))),
        (3.5, pod(("PodScheduled", "True"), ("Ready", "True"))),
        (4.0, pod(("PodScheduled", "True"), ("Ready", "True"))),
    ]
    assert pr.first_true(events, "PodScheduled") == 1.2
    assert pr.first_true(events, "Ready") == 3.5
    assert pr.first_true(events, "Initialized") is None


def logrus(clock: str, msg: str) -> str:
    return f'time="2026-12-05T{clock}Z" level=info msg="{msg}"'


@pytest.mark.parametrize(
    "meta",
    [
        f"&PodSandboxMetadata{{Name:p,Uid:{UID},Namespace:ai-workloads,Attempt:0,}}",
        f'name:\\"p\\" uid:\\"{UID}\\" namespace:\\"ai-workloads\\"',
    ],
    ids=["gogo", "protobuf-go"],
)
def test_containerd_marks_of_one_pod(meta: str) -> None:
    log = "\n".join(
        [
            logrus("07:00:00.000000001", "RunPodSandbox for &PodSandboxMetadata{Name:other,Uid:zzz,}"),
            logrus("07:00:01.100000000", f"RunPodSandbox for {meta}"),
            "a line without a time",
            logrus("07:00:03.600000999", f'RunPodSandbox for {meta} returns sandbox id \\"{SANDBOX}\\"'),
            logrus("07:00:03.700000000", f'CreateContainer within sandbox \\"{SANDBOX}\\" for container x'),
            logrus(
                "07:00:03.800000000",
                f'CreateContainer within sandbox \\"{SANDBOX}\\" for x returns container id \\"{CONTAINER}\\"',
            ),
            logrus("07:00:03.810000000", f'StartContainer for \\"{CONTAINER}\\"'),
            logrus("07:00:04.000000000", f'StartContainer for \\"{CONTAINER}\\" returns successfully'),
        ]
    )
    marks = pr.containerd_marks(log, UID)
    assert marks == pytest.approx(
        {
            "sandbox_start": epoch("07:00:01.1"),
            "sandbox_end": epoch("07:00:03.600000"),
            "container_start": epoch("07:00:03.7"),
            "container_end": epoch("07:00:04"),
        }
    )
    assert pr.containerd_marks(log, "no-such-uid") == {}


def test_prepare_window_within_the_pods_time() -> None:
    driver = 'driverName="sriov.example"'
    log = "\n".join(
        [
            f'I1205 06:59:00.000000 1 x.go:1] "Calling NodePrepareResources rpc" {driver}',
            f'I1205 07:00:00.500000 1 x.go:1] "Calling NodePrepareResources rpc" {driver}',
            'I1205 07:00:00.550000 1 x.go:1] "Calling NodePrepareResources rpc" driverName="gpu.example"',
            f'I1205 07:00:00.800000 1 x.go:1] "Done calling NodePrepareResources rpc" {driver}',
            f'I1205 07:00:09.000000 1 x.go:1] "Done calling NodePrepareResources rpc" {driver}',
        ]
    )
    window = pr.prepare_window(log, epoch("07:00:00"), epoch("07:00:05"), "sriov.example")
    assert window == pytest.approx((epoch("07:00:00.5"), epoch("07:00:00.8")))
    assert pr.prepare_window(log, epoch("08:00:00"), epoch("08:00:05"), "sriov.example") is None
    assert pr.klog_epoch("not klog", 2026) is None


def test_shim_add_seconds_of_the_named_pod() -> None:
    entries = [("ADD ok", "ns/other", 9.0), ("DEL ok", "ns/p", 1.0), ("ADD ok", "ns/p", 2.5)]
    lines = [json.dumps({"msg": msg, "pod": name, "seconds": s}) for msg, name, s in entries]
    log = "\n".join(["not json", *lines])
    assert pr.shim_add_seconds(log, "ns/p") == 2.5
    assert pr.shim_add_seconds(log, "ns/none") is None


def test_multus_adds_mark_who_answered() -> None:
    args = "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c"
    log = "\n".join(
        [
            f'2026-12-05T07:00:01Z [verbose] ADD starting CNI request ContainerID:"c" Args:"{args}"',
            f'2026-12-05T07:00:02Z [verbose] DEL starting CNI request Args:"{args}"',
            f'2026-12-05T07:00:07Z [verbose] ADD finished CNI request ContainerID:"c" Args:"{args}"',
        ]
    )
    assert pr.multus_adds(log, "ns", "p") == 1
    assert pr.multus_adds(log, "ns", "q") == 0
    # containerd builds CNI_ARGS from a map: any order, the name last before the closing quote.
    shuffled = (
        'T [verbose] ADD starting CNI request Args:"K8S_POD_UID=u;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p1"'
    )
    assert pr.multus_adds(shuffled, "ns", "p1") == 1
    assert pr.multus_adds(shuffled, "ns", "p") == 0


def test_spans_relative_to_the_create_call() -> None:
    wall = epoch("07:00:00")
    sample = {
        "created_wall": wall,
        "created_mono": 100.0,
        "scheduled": 100.05,
        "ready": 107.0,
        "prepare": (wall + 0.4, wall + 0.7),
        "cni_add": 5.5,
        "containerd": {
            "sandbox_start": wall + 0.8,
            "sandbox_end": wall + 6.6,
            "container_start": wall + 6.7,
            "container_end": wall + 6.9,
        },
    }
    assert pr.spans(sample) == pytest.approx(
        {
            "scheduled": 0.05,
            "ready": 7.0,
            "prepare": 0.3,
            "prepare_start_at": 0.4,
            "sandbox": 5.8,
            "sandbox_start_at": 0.8,
            "sandbox_end_at": 6.6,
            "cni_add": 5.5,
            "container": 0.2,
            "container_start_at": 6.7,
            "container_end_at": 6.9,
        }
    )
    bare = pr.spans({"created_wall": wall, "created_mono": 1.0, "ready": 3.0})
    assert bare == {"ready": 2.0}
    summary = pr.span_summary([sample, {**sample, "ready": 109.0}])
    assert summary["ready"] == {"median": 8.0, "max": 9.0, "n": 2}


def test_baseline_cni_add_is_its_sandbox_less_ours_outside_the_add() -> None:
    ours = {"sandbox": {"median": 6.0}, "cni_add": {"median": 5.5}}
    assert pr.baseline_cni_add(ours, {"sandbox": {"median": 5.0}}) == pytest.approx(4.5)
    assert pr.baseline_cni_add({"sandbox": {"median": 6.0}}, {"sandbox": {"median": 5.0}}) is None


def test_baseline_pod_names_the_static_nads_without_a_claim() -> None:
    ours: dict[str, Any] = {
        "metadata": {"name": "eight-pairs", "namespace": "ai-workloads"},
        "spec": {
            "containers": [{"name": "w", "resources": {"claims": [{"name": "devices"}]}}],
            "resourceClaims": [{"name": "devices", "resourceClaimTemplateName": "t"}],
        },
    }
    nads = [{"metadata": {"name": f"static-rail-{r}"}} for r in "ab"]
    base = pr.baseline_pod(ours, nads)
    assert "resourceClaims" not in base["spec"]
    assert base["spec"]["containers"][0]["resources"] == {}
    assert base["metadata"]["annotations"] == {
        "k8s.v1.cni.cncf.io/networks": "static-rail-a@dra0,static-rail-b@dra1"
    }
    assert "resourceClaims" in ours["spec"]  # the original is left alone
    renamed = pr.named(base, "static-eight-3")
    assert renamed["metadata"]["name"] == "static-eight-3"
    assert renamed["spec"]["terminationGracePeriodSeconds"] == 1


def side(p50: float, p99: float) -> dict[str, Any]:
    return {"ready_s": {"p50": p50, "p99": p99}, "spans_s": {"sandbox": {"median": p50 - 1}}}


@pytest.mark.parametrize(("ours_p99", "met"), [(6.0, True), (7.5, False)])
def test_target_row_compares_the_p99s(ours_p99: float, met: bool) -> None:
    result = {
        "sides": {pr.OURS: side(5.0, ours_p99), pr.BASELINE: side(5.5, 7.0)},
        "ratio_p99": ours_p99 / 7.0,
    }
    rows = {r["figure"]: r for r in report.targets({"podready": result})}
    row = rows["eight-pair Pod creation -> Ready p99, real kubelet"]
    assert row["met"] is met
    assert "NodePrepare ?" in row["why"]  # a span the run did not see is shown as unknown
    skipped = {r["figure"]: r for r in report.targets({"podready": {"skipped": "no root"}})}
    assert skipped["eight-pair Pod creation -> Ready p99, real kubelet"]["met"] is None


def test_report_prints_both_sides_and_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    ours = {**side(5.0, 6.0), "answered_by": {"cni-shim-daemon": 10, "multus-daemon": 0}}
    ours["ready_s"]["max"] = 6.0
    ours["spans_s"] = {
        "sandbox": {"median": 4.0, "max": 5.0, "n": 10},
        "cni_add": {"median": 3.5, "max": 4.5, "n": 10},
    }
    base = {**side(5.5, 7.0), "answered_by": {"cni-shim-daemon": 0, "multus-daemon": 10}}
    base["ready_s"]["max"] = 7.0
    base["spans_s"] = {"sandbox": {"median": 4.5, "max": 5.5, "n": 10}}
    base["spans_s"]["cni_add_estimated"] = {"median": pr.baseline_cni_add(ours["spans_s"], base["spans_s"])}
    pr.report(
        {
            "cycles": 10,
            "warmup": 1,
            "sides": {pr.OURS: ours, pr.BASELINE: base},
            "ratio_p50": 0.9,
            "ratio_p99": 0.86,
        }
    )
    out = capsys.readouterr().out
    assert "p99 x0.86" in out and "cni_add_estimated 4.000" in out
    pr.report({"skipped": "no root"})
    assert "not measured (no root)" in capsys.readouterr().out
