"""Lock order, re-entrance, and prepare racing release of the same claim UID."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sriov_dra.prepare.locks import LockOrderError, OperationLocks
from tests.fakes.driver_env import Env, vf_config


def test_locks_refuse_reentry_and_clean_up() -> None:
    locks = OperationLocks()
    with locks.claim_then_pod("c1", "p1"), pytest.raises(LockOrderError), locks.claim_then_pod("c2", "p1"):
        pass
    assert locks.idle()


def test_pod_lock_serializes_two_claims_of_one_pod() -> None:
    locks = OperationLocks()
    inside: list[str] = []
    overlap: list[bool] = []
    gate = threading.Barrier(2)

    def run(claim: str) -> None:
        gate.wait()
        for _ in range(200):
            with locks.claim_then_pod(claim, "pod"):
                inside.append(claim)
                overlap.append(len(inside) > 1)
                inside.remove(claim)

    threads = [threading.Thread(target=run, args=(c,)) for c in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(overlap) == 400 and not any(overlap)
    assert locks.idle()


def test_prepare_racing_release_of_the_same_claim_always_ends_consistent(tmp_path: Path) -> None:
    env = Env(tmp_path)
    env.source_nad()
    pod, ref = env.pod_with_claim(["0000-17-00-1"], [vf_config(netAttachDefName="rail-a")])
    for _ in range(25):
        assert env.prepare(ref).error == ""
        gate = threading.Barrier(2)
        results: dict[str, str] = {}

        def prepare(gate=gate, results=results) -> None:
            gate.wait()
            results["prepare"] = env.prepare(ref).error

        def release(gate=gate, results=results) -> None:
            gate.wait()
            results["release"] = env.unprepare(ref)

        threads = [threading.Thread(target=prepare), threading.Thread(target=release)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results["release"] == "" and results["prepare"] == "", results
        prepared = env.checkpoint.snapshot_claim(ref.uid) is not None
        if prepared:  # prepare ran last: a complete, published binding
            assert env.phases(ref.uid) == ["Ready"]
            assert len(env.shadows()) == 1 and len(env.networks(pod)) == 1
            assert env.unprepare(ref) == ""
        assert env.shadows() == [] and env.networks(pod) == [] and env.checkpoint.snapshot_all() == []
        assert env.service.locks.idle()
