"""Crashed runs are found and cleaned; live runs and kept logs are never touched."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from testbed import runstate
from testbed.processes import is_running, launch, start_ticks, stop
from testbed.waiting import wait_for


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTO_SRIOV_TESTBED_ROOT", str(tmp_path / "runs"))
    monkeypatch.setattr(runstate, "shm_root", lambda: tmp_path / "shm")
    return tmp_path / "runs"


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def all_gone(state: runstate.BedState) -> bool:
    # stop() reaps its own children, so Popen.wait() cannot see their exit status: ask /proc.
    return not any(is_running(p.pid, p.start_ticks) for p in state.processes)


def run_with_sleeper(root: Path, run_id: str) -> tuple[runstate.BedState, subprocess.Popen[bytes]]:
    state = runstate.new_state(root, run_id, "node-a")
    state.etcd_data_dir.mkdir(parents=True)
    proc, rec = launch(
        "sleeper", ["sleep", "300"], state.log_dir / "sleeper.log", cwd=root, die_with_parent=True
    )
    state.processes.append(rec)
    state.save()
    return state, proc


def test_state_round_trips(root: Path) -> None:
    state, _ = run_with_sleeper(root, "r1")
    try:
        state.ports = {"apiserver": 1234}
        state.kubeconfigs = {"admin": "/x/admin.json"}
        state.save()
        assert runstate.load(state.path) == state
    finally:
        stop(state.processes)


def test_run_whose_owner_died_is_cleaned(root: Path) -> None:
    state, _ = run_with_sleeper(root, "crashed")
    state.owner_pid, state.owner_ticks = dead_pid(), 1
    state.save()
    assert runstate.is_stale(runstate.load(state.path))

    assert runstate.cleanup_stale(root) == ["crashed"]
    assert all_gone(state)
    assert not state.run_dir.exists() and not state.etcd_data_dir.exists()


def test_live_run_and_kept_logs_are_left_alone(root: Path) -> None:
    live, _ = run_with_sleeper(root, "live")
    kept = runstate.new_state(root, "kept", "node-a")
    kept.stopped, kept.owner_pid = True, None
    kept.save()
    try:
        assert runstate.cleanup_stale(root) == []
        assert not all_gone(live)
        assert kept.path.exists()
    finally:
        runstate.dispose(live, keep_logs=False)
    assert all_gone(live)


def test_detached_run_is_stale_once_a_process_died(root: Path) -> None:
    state, proc = run_with_sleeper(root, "detached")
    state.owner_pid = state.owner_ticks = None
    state.save()
    assert not runstate.is_stale(state)
    os.killpg(proc.pid, 9)
    proc.wait()
    assert runstate.is_stale(state)
    assert runstate.cleanup_stale(root) == ["detached"]


def test_dispose_keeping_logs_marks_the_run_stopped(root: Path) -> None:
    state, _ = run_with_sleeper(root, "failed-session")
    runstate.dispose(state, keep_logs=True)
    assert all_gone(state)
    reloaded = runstate.load(state.path)
    assert reloaded.stopped and reloaded.owner_pid is None and not runstate.is_stale(reloaded)
    assert (state.log_dir / "sleeper.log").exists()


def test_recycled_pid_is_not_mistaken_for_our_process() -> None:
    me = os.getpid()
    ticks = start_ticks(me)
    assert ticks is not None
    assert is_running(me, ticks)
    assert not is_running(me, ticks + 1)


def test_stop_escalates_to_sigkill_for_a_process_ignoring_sigterm(tmp_path: Path) -> None:
    proc, rec = launch(
        "stubborn",
        ["bash", "-c", "trap '' TERM; echo ready; sleep 300 & wait"],
        tmp_path / "stubborn.log",
        cwd=tmp_path,
        die_with_parent=True,
    )
    wait_for(lambda: b"ready" in (tmp_path / "stubborn.log").read_bytes(), 10.0, what="trap installed")
    assert stop([rec], grace=0.5) == ["stubborn"]
    assert not is_running(rec.pid, rec.start_ticks)
    assert proc.pid == rec.pid
