"""Managed prepare, repair and release reporting status.devices, over the in-memory API of the
managed suite: what is written, what a repeat costs, and that a refused write changes nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sriov_contract.errors import ReasonedError
from sriov_contract.keys import NETWORK_STATUS_ANNOTATION
from sriov_dra.model import DRIVER_NAME
from sriov_dra.prepare.devicestatus import SETTLE_AFTER_WRITE, DeviceStatusWriter
from tests.fakes import driver_env as managed_env
from tests.fakes.driver_env import NODE, NS, Env, vf_config
from tests.fakes.kube_api import Fault

VF1 = "0000-17-00-1"
GPU = {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0", "data": {"uuid": "g"}}


class ClaimStatus:
    """The claim half of the fake API that the status writer needs."""

    def __init__(self, env: Env) -> None:
        self.api = env.api

    def get_claim(self, namespace: str, name: str) -> Any:
        obj = self.api._call("get", "claims", name, lambda: self.api.get("claims", namespace, name))
        if obj is None:
            raise ReasonedError("ClaimNotFound", f"claim {namespace}/{name} not found")
        return obj

    def patch_claim_status(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> Any:
        return self.api._call(
            "patch", "claims", name, lambda: self.api._patch("claims", namespace, name, ops)
        )


class Failures:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def phase(self, record: Any, phase: str) -> None:
        pass

    def failed(self, operation: str, ref: Any, record: Any, error: ReasonedError) -> None:
        self.seen.append((operation, error.reason))


@dataclass
class Harness:
    env: Env
    requests: list[tuple[str, str]] = field(default_factory=list)
    failures: Failures = field(default_factory=Failures)
    clock: float = 0.0


@pytest.fixture
def h(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Harness:
    e = Env(tmp_path)
    e.source_nad()
    h = Harness(e)
    status = ClaimStatus(e)
    # every claim read goes through the fake's request log, like every other call
    monkeypatch.setattr(managed_env.Claims, "get_claim", lambda self, ns, name: status.get_claim(ns, name))
    call = e.api._call

    def counted(verb: str, kind: str, name: str, action: Any) -> Any:
        h.requests.append((verb, kind))
        return call(verb, kind, name, action)

    monkeypatch.setattr(e.api, "_call", counted)
    # Env builds the service without status reporting; these tests switch it on.
    e.service._device_status = DeviceStatusWriter(status, clock=lambda: h.clock, sleep=e.sleeps.append)
    e.service._observer = h.failures
    return h


def devices(env: Env) -> list[dict[str, Any]]:
    return list(env.api.stored("claims", NS, "c")["status"].get("devices") or [])


def with_gpu(env: Env) -> Any:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    claim = env.api.stored("claims", NS, "c")
    claim["status"]["allocation"]["devices"]["results"].append({"request": "gpu", **GPU})
    claim["status"]["devices"] = [GPU]
    env.api.put("claims", claim)
    return pod, ref


def test_first_prepare_adds_one_status_write_and_a_repeat_writes_nothing(h: Harness) -> None:
    env = h.env
    _pod, ref = with_gpu(env)
    assert env.prepare(ref).error == ""
    first = list(h.requests)
    # what prepare did before status reporting, then the one status write on the claim read first
    assert first == [
        ("get", "claims"),
        ("get", "pods"),
        ("get", "nads"),
        ("create", "nads"),
        ("get", "pods"),
        ("get", "claims"),
        ("patch", "pods"),
        ("patch", "claims"),
    ]
    gpu, ours = devices(env)
    (shadow,) = env.shadows()
    assert gpu == GPU
    assert (ours["driver"], ours["pool"], ours["device"]) == (DRIVER_NAME, NODE, VF1)
    assert ours["data"]["shadow"] == {
        "namespace": NS,
        "name": shadow["metadata"]["name"],
        "uid": shadow["metadata"]["uid"],
    }
    assert [(c["type"], c["status"]) for c in ours["conditions"]] == [("Ready", "True")]

    h.requests.clear()
    assert env.prepare(ref).error == ""
    assert [r for r in h.requests if r[0] != "get"] == []
    env.repair.repair_claim(ref.uid)
    assert env.api.writes[-1] == ("patch", "claims", "c")  # the first prepare's, not a new one
    assert h.failures.seen == []


def test_repair_copies_network_status_and_release_removes_only_our_entry(h: Harness) -> None:
    env = h.env
    pod, ref = with_gpu(env)
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    live = env.live_pod(pod)
    status = f'[{{"name": "{NS}/{shadow["metadata"]["name"]}", "interface": "dra0", "ips": ["192.0.2.9"]}}]'
    live["metadata"].setdefault("annotations", {})[NETWORK_STATUS_ANNOTATION] = status
    env.api.put("pods", live)
    env.repair.repair_claim(ref.uid)  # settling after prepare's write: nothing yet
    assert "networkData" not in devices(env)[1]
    h.clock += SETTLE_AFTER_WRITE
    env.repair.repair_claim(ref.uid)
    assert devices(env)[1]["networkData"] == {"interfaceName": "dra0", "ips": ["192.0.2.9/32"]}

    assert env.unprepare(ref) == ""
    assert devices(env) == [GPU]


def test_a_refused_status_write_still_prepares_and_repair_backs_off(h: Harness) -> None:
    env = h.env
    _pod, ref = with_gpu(env)
    env.api.fail("patch", "claims", Fault(403))
    out = env.prepare(ref)
    assert out.error == "" and env.phases(ref.uid) == ["Ready"]
    assert h.failures.seen == [("device-status", "AccessDenied")]
    assert devices(env) == [GPU]

    h.requests.clear()
    env.repair.repair_claim(ref.uid)  # within the backoff: the write is not retried
    assert ("patch", "claims") not in h.requests

    env.api.fail("patch", "claims", Fault(403))
    assert env.unprepare(ref) == ""  # release does not wait on the status either
    assert h.failures.seen[-1] == ("device-status", "AccessDenied")
    assert env.checkpoint.snapshot_claim(ref.uid) is None and env.shadows() == []


def test_a_bug_in_status_reporting_never_fails_prepare(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    env = h.env
    _pod, ref = with_gpu(env)

    def broken(self: ClaimStatus, namespace: str, name: str, ops: list[dict[str, Any]]) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(ClaimStatus, "patch_claim_status", broken)
    assert env.prepare(ref).error == "" and env.phases(ref.uid) == ["Ready"]
    assert h.failures.seen == [("device-status", "DeviceStatusFailed")]
    assert env.unprepare(ref) == "" and env.checkpoint.snapshot_claim(ref.uid) is None
