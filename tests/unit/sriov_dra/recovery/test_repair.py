"""The repair worker over the in-memory API (spec 8.3): what is repaired, what stops repair, what
resumes a release, and that nothing here ever releases hardware on its own authority."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from sriov_contract.keys import PROTECTION_FINALIZER, REGISTRY_ANNOTATION
from sriov_contract.registry import parse_registry
from sriov_dra.apierrors import ApiError, api_error
from sriov_dra.core.backoff import backoff
from sriov_dra.observe.bindingreporter import BindingReporter
from sriov_dra.observe.eventrecorder import EventRecorder, InvolvedObject
from sriov_dra.observe.metrics import CountingSlices, DriverMetrics
from sriov_dra.recovery.repair import BACKING_OFF, RepairWorker
from tests.fakes.driver_env import NS, Env, vf_config
from tests.fakes.kube_api import Fault, Obj
from tests.support.checkpoint import managed_binding

VF1 = "0000-17-00-1"


class Sink:
    def __init__(self) -> None:
        self.events: list[Obj] = []

    def create_event(self, namespace: str, body) -> None:
        assert body["metadata"]["namespace"] == namespace
        self.events.append(dict(body))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def prepared(env: Env):
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    env.vf_driver.calls.clear()
    return pod, ref, shadow


def worker(env: Env, **kw) -> RepairWorker:
    return RepairWorker(env.repair, env.checkpoint.snapshot_all, **kw)


def registry_uids(env: Env, pod: Obj) -> list[str]:
    text = env.live_pod(pod)["metadata"]["annotations"][REGISTRY_ANNOTATION]
    return [e.uid for e in parse_registry(text).entries]


def test_healthy_binding_costs_no_writes(env: Env) -> None:
    prepared(env)
    env.api.writes.clear()
    assert list(worker(env).run_once().values()) == [""]
    assert env.api.writes == []


def test_truly_gone_shadow_is_recreated_after_pending_with_cleared_uid_is_persisted(env: Env) -> None:
    pod, ref, shadow = prepared(env)
    del env.api.objects[("nads", NS, shadow["metadata"]["name"])]
    # the create is not answered: the record must already say Pending with no UID
    env.api.fail("create", "nads", Fault(500))
    assert worker(env).run_once() == {ref.uid: "ApiRequestFailed"}
    binding = managed_binding(env.checkpoint, ref.uid)
    assert (binding["phase"], binding["shadowUID"]) == ("Pending", "")
    assert env.shadows() == []

    assert worker(env).run_once() == {ref.uid: ""}
    (again,) = env.shadows()
    new_uid = again["metadata"]["uid"]
    assert new_uid != shadow["metadata"]["uid"] and again["spec"] == shadow["spec"]
    assert again["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    assert registry_uids(env, pod) == [new_uid]
    assert env.phases(ref.uid) == ["Ready"]
    assert managed_binding(env.checkpoint, ref.uid)["shadowUID"] == new_uid
    assert [c[0] for c in env.hardware_calls()] == []


def test_terminating_shadow_is_never_recreated_and_nothing_is_released(env: Env) -> None:
    _pod, ref, shadow = prepared(env)
    env.api.delete_nad(NS, shadow["metadata"]["name"], shadow["metadata"]["uid"])
    env.api.writes.clear()
    assert worker(env).run_once() == {ref.uid: "ShadowDeletionPending"}
    (still,) = env.shadows()
    assert still["metadata"]["uid"] == shadow["metadata"]["uid"] and still["metadata"]["deletionTimestamp"]
    assert env.api.writes == [] and env.phases(ref.uid) == ["Ready"] and env.hardware_calls() == []


def test_missing_finalizer_on_live_shadow_is_restored_with_uid_and_version_tests(env: Env) -> None:
    _pod, ref, shadow = prepared(env)
    key = ("nads", NS, shadow["metadata"]["name"])
    env.api.objects[key]["metadata"]["finalizers"] = ["example.com/keep"]
    patches: list[list[Obj]] = []
    real = env.api.patch_nad

    def spy(namespace, name, ops):
        patches.append(copy.deepcopy(ops))
        return real(namespace, name, ops)

    env.api.patch_nad = spy  # type: ignore[method-assign]
    assert worker(env).run_once() == {ref.uid: ""}
    assert env.api.objects[key]["metadata"]["finalizers"] == ["example.com/keep", PROTECTION_FINALIZER]
    (ops,) = patches
    assert {op["path"] for op in ops if op["op"] == "test"} == {"/metadata/uid", "/metadata/resourceVersion"}


def test_stripped_registry_and_selection_are_restored(env: Env) -> None:
    pod, ref, shadow = prepared(env)
    live = env.api.objects[("pods", NS, pod["metadata"]["name"])]
    live["metadata"]["annotations"] = {"team": "x"}
    assert worker(env).run_once() == {ref.uid: ""}
    assert registry_uids(env, pod) == [shadow["metadata"]["uid"]]
    assert env.networks(pod)[0]["name"] == shadow["metadata"]["name"]
    assert env.live_pod(pod)["metadata"]["annotations"]["team"] == "x"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("terminating", "PodTerminating"),
        ("allocation", "AllocationChanged"),
        ("node", "NodeReplaced"),
        ("claim", "ClaimReplaced"),
    ],
)
def test_forward_repair_stops_and_never_releases(env: Env, change: str, reason: str) -> None:
    pod, ref, shadow = prepared(env)
    del env.api.objects[("nads", NS, shadow["metadata"]["name"])]
    claim_key = ("claims", NS, ref.name)
    if change == "terminating":
        env.api.objects[("pods", NS, pod["metadata"]["name"])]["metadata"]["deletionTimestamp"] = (
            "2026-01-01T00:00:00Z"
        )
    elif change == "allocation":
        env.api.objects[claim_key]["status"]["allocation"]["devices"]["results"][0]["device"] = "0000-17-00-2"
    elif change == "node":
        env.live_node_uid = "00000000-1111-4222-8333-944455556666"
    else:
        env.api.objects[claim_key]["metadata"]["uid"] = "11111111-1111-4111-8111-111111111111"
    env.api.writes.clear()
    assert worker(env).run_once() == {ref.uid: reason}
    assert env.shadows() == [] and env.api.writes == []
    assert env.phases(ref.uid) == ["Ready"] and env.hardware_calls() == []
    assert env.cdi.exists(ref.uid)


def test_deleting_record_resumes_authorized_release(env: Env) -> None:
    pod, ref, _shadow = prepared(env)
    env.api.fail("delete", "nads", Fault(500))
    assert env.unprepare(ref).startswith("ApiRequestFailed")
    assert env.phases(ref.uid) == ["Deleting"]
    assert worker(env).run_once() == {ref.uid: ""}
    assert env.checkpoint.snapshot_all() == [] and env.shadows() == []
    assert env.networks(pod) == [] and not env.cdi.exists(ref.uid)


def test_release_complete_record_finishes_api_work_only(env: Env) -> None:
    _pod, ref, _shadow = prepared(env)
    env.api.fail("patch", "nads", Fault(403))
    assert env.unprepare(ref).startswith("AccessDenied")
    assert env.phases(ref.uid) == ["ReleaseComplete"]
    calls = env.hardware_calls()
    assert worker(env).run_once() == {ref.uid: ""}
    assert env.hardware_calls() == calls
    assert env.checkpoint.snapshot_all() == [] and env.shadows() == []


def test_failures_back_off_and_are_reported_once_per_streak(env: Env) -> None:
    pod, ref, shadow = prepared(env)
    env.api.delete_nad(NS, shadow["metadata"]["name"], shadow["metadata"]["uid"])
    sink, clock, metrics = Sink(), Clock(), DriverMetrics()
    reporter = BindingReporter(EventRecorder(sink, host="node-a"), metrics)
    w = worker(env, observer=reporter, metrics=metrics, clock=clock)
    assert w.run_once() == {ref.uid: "ShadowDeletionPending"}
    assert w.run_once() == {ref.uid: BACKING_OFF}  # no API call before the backoff ends
    clock.now += backoff(1)
    assert w.run_once() == {ref.uid: "ShadowDeletionPending"}
    clock.now += backoff(2) - 0.01
    assert w.run_once() == {ref.uid: BACKING_OFF}
    kinds = sorted((e["involvedObject"]["kind"], e["reason"]) for e in sink.events)
    assert kinds == [("Pod", "ShadowDeletionPending"), ("ResourceClaim", "ShadowDeletionPending")]
    pod_event = next(e for e in sink.events if e["involvedObject"]["kind"] == "Pod")
    assert pod_event["involvedObject"]["uid"] == pod["metadata"]["uid"] and pod_event["type"] == "Warning"
    assert shadow["metadata"]["name"] in pod_event["message"] and "being deleted" in pod_event["message"]
    assert metrics.failures.labels("repair", "ShadowDeletionPending")._value.get() == 2


def test_events_never_carry_cni_config_or_ipam(env: Env) -> None:
    sink = Sink()
    env.service._observer = BindingReporter(EventRecorder(sink, host="node-a"), None)
    _pod, _ref, shadow = prepared(env)
    reasons = [e["reason"] for e in sink.events]
    assert reasons == ["BindingPending", "BindingPending", "BindingReady", "BindingReady"]
    for event in sink.events:
        assert "10.56.217" not in event["message"] and "ipam" not in event["message"]
        assert shadow["metadata"]["name"] in event["message"] and "rail-a" in event["message"]


def test_identical_events_are_sent_once_and_a_failed_send_is_retried() -> None:
    class Flaky(Sink):
        fail = True

        def create_event(self, namespace, body) -> None:
            if self.fail:
                self.fail = False
                raise OSError("down")
            super().create_event(namespace, body)

    sink = Flaky()
    rec = EventRecorder(sink, host="n")
    obj = InvolvedObject("Pod", "v1", "ns", "p", "u1")
    assert not rec.emit(obj, "Warning", "X", "m")
    assert rec.emit(obj, "Warning", "X", "m")
    assert not rec.emit(obj, "Warning", "X", "m")
    assert rec.emit(obj, "Warning", "X", "other")
    assert len(sink.events) == 2


def test_a_started_recorder_writes_from_its_sender_and_never_makes_emit_wait() -> None:
    """Four Events per prepare went out inline; now the sender writes them, in order."""
    gate = threading.Event()

    class Slow(Sink):
        fail = True

        def create_event(self, namespace, body) -> None:
            gate.wait(10)  # an API server that takes its time
            if body["message"] == "m" and self.fail:
                self.fail = False
                raise OSError("down")
            super().create_event(namespace, body)

    sink = Slow()
    rec = EventRecorder(sink, host="n", queued=2).start()
    obj = InvolvedObject("Pod", "v1", "ns", "p", "u1")
    assert rec.emit(obj, "Warning", "X", "m")  # queued: the write has not happened yet
    assert rec.emit(obj, "Warning", "X", "n")
    assert not rec.emit(obj, "Warning", "X", "m")  # the same one, still in flight
    deadline = time.monotonic() + 5
    while rec._queue.qsize() == 2 and time.monotonic() < deadline:
        pass  # the sender takes the first and waits at the gate
    assert rec.emit(obj, "Warning", "X", "o")  # the queue has room for one more
    assert not rec.emit(obj, "Warning", "X", "p")  # full: dropped, never waited for
    assert sink.events == []
    gate.set()
    rec.close(5)
    assert [e["message"] for e in sink.events] == ["n", "o"]  # "m" failed: forgotten, so ...
    assert rec.emit(obj, "Warning", "X", "m")  # ... sent again when it comes up again (inline now)
    assert [e["message"] for e in sink.events] == ["n", "o", "m"]


def test_binding_phase_gauge_counts_the_checkpoint(env: Env) -> None:
    metrics = DriverMetrics()
    metrics.watch_bindings(env.checkpoint.snapshot_all)
    prepared(env)
    assert metrics.registry.get_sample_value("sriov_dra_bindings", {"phase": "Ready"}) == 1
    assert metrics.registry.get_sample_value("sriov_dra_bindings", {"phase": "Pending"}) == 0


def test_reason_labels_are_bounded() -> None:
    metrics = DriverMetrics()
    for i in range(100):
        metrics.failure("prepare", f"Reason{i}")
    metrics.failure("prepare", "not camel")
    labels = {
        sample.labels["reason"]
        for family in metrics.registry.collect()
        for sample in family.samples
        if "reason" in sample.labels
    }
    assert len(labels) == 65 and "Other" in labels


def test_counting_slices_count_each_forwarded_write_and_no_failed_one() -> None:
    class Slices:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []

        def list(self) -> list[dict[str, Any]]:
            return [{"metadata": {"name": "s0"}}]

        def create(self, body: Mapping[str, Any]) -> None:
            self.calls.append(("create", body["metadata"]["name"]))

        def replace(self, name: str, body: Mapping[str, Any]) -> None:
            if name == "refused":
                raise api_error(409, "update", f"ResourceSlice {name}")
            self.calls.append(("replace", name))

        def delete(self, name: str) -> None:
            self.calls.append(("delete", name))

    metrics, inner = DriverMetrics(), Slices()
    slices = CountingSlices(inner, metrics)
    assert slices.list() == [{"metadata": {"name": "s0"}}]
    slices.create({"metadata": {"name": "s1"}})
    slices.replace("s0", {})
    slices.replace("s0", {})
    with pytest.raises(ApiError):
        slices.replace("refused", {})
    slices.delete("s1")
    assert inner.calls == [("create", "s1"), ("replace", "s0"), ("replace", "s0"), ("delete", "s1")]
    written = {
        op: metrics.registry.get_sample_value("sriov_dra_resourceslice_writes_total", {"operation": op})
        for op in ("create", "replace", "delete")
    }
    assert written == {"create": 1, "replace": 2, "delete": 1}


def test_api_errors_are_counted_by_status_and_other_failures_are_not(env: Env) -> None:
    metrics = DriverMetrics()
    env.service._observer = BindingReporter(None, metrics)
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    env.api.fail("patch", "pods", Fault(403))
    assert env.prepare(ref).error.startswith("AccessDenied:")
    metrics.failure("repair", "ShadowDeletionPending")  # no API status: not an API error
    samples = {
        sample.labels["status"]: sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == "sriov_dra_api_errors_total"
    }
    assert samples == {"403": 1}
    assert (
        metrics.registry.get_sample_value(
            "sriov_dra_failures_total", {"operation": "prepare", "reason": "AccessDenied"}
        )
        == 1
    )


def test_every_repair_pass_is_timed(env: Env) -> None:
    prepared(env)
    ticks = iter([100.0, 100.25, 200.0, 200.5])
    metrics = DriverMetrics()
    w = worker(env, metrics=metrics, clock=lambda: next(ticks))
    w.run_once()
    w.run_once()
    assert metrics.registry.get_sample_value("sriov_dra_repair_duration_seconds_count") == 2
    assert metrics.registry.get_sample_value("sriov_dra_repair_duration_seconds_sum") == 0.75
    assert metrics.registry.get_sample_value("sriov_dra_repair_duration_seconds_bucket", {"le": "0.25"}) == 1


def test_worker_thread_passes_on_trigger_and_stops(env: Env) -> None:
    prepared(env)
    w = worker(env, interval=3600)
    stop = threading.Event()
    t = threading.Thread(target=w.run, args=(stop,))
    t.start()
    try:
        w.trigger()
        end = time.monotonic() + 10.0
        while w.passes == 0 and time.monotonic() < end:
            time.sleep(0.01)
        assert w.passes == 1
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()
    assert json.loads((env.tmp / "checkpoint.json").read_text())
