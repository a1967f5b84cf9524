"""Long-running child processes of the bed: start in their own process group, find, stop.

A process is identified by pid AND kernel start time, so a recycled pid from a crashed run is
never mistaken for (and never killed as) one of ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.tools import REPO_ROOT

# The product's console scripts (sriov-dra-driver, cni-shim-daemon, ...), installed in this venv.
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    start_ticks: int
    log: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "start_ticks": self.start_ticks, "log": self.log}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessRecord:
        return cls(str(data["name"]), int(data["pid"]), int(data["start_ticks"]), str(data["log"]))


def start_ticks(pid: int) -> int | None:
    """Kernel start time of ``pid`` in clock ticks, or None when no such live process exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm (field 2) may contain spaces and parentheses; everything after the last ')' is fixed.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def is_running(pid: int, ticks: int) -> bool:
    return start_ticks(pid) == ticks


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dying_with_parent(argv: Sequence[str]) -> list[str]:
    """``argv`` started so that it gets SIGKILL when the thread that started it ends.

    Children of a pytest session must not outlive it if it is SIGKILLed; detached beds
    (scripts/testbed up) skip this because their parent exits right after start-up. SIGKILL, not
    SIGTERM: etcd and kube-apiserver terminated together wait on each other's graceful shutdown.
    setpriv sets PR_SET_PDEATHSIG and execs ``argv`` (same pid), instead of a ``preexec_fn``:
    Python code between fork and exec is not safe in a threaded parent (the soak's restarts died
    there in gRPC's fork handler, the bed's gRPC plugins run threads). The "parent" is the thread
    that forked: start long-lived children from the main thread only.
    """
    return ["setpriv", "--pdeathsig", "KILL", "--", *argv]


def launch(
    name: str,
    argv: Sequence[str],
    log: Path,
    *,
    cwd: Path,
    die_with_parent: bool,
    env: Mapping[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], ProcessRecord]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            dying_with_parent(argv) if die_with_parent else list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    ticks = start_ticks(proc.pid)
    if ticks is None:
        proc.wait()
        ticks = 0
    return proc, ProcessRecord(name, proc.pid, ticks, str(log))


def _reap(pid: int) -> None:
    # Only our own children can be reaped; for adopted ones (a detached bed) init does it.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _gone(rec: ProcessRecord) -> bool:
    _reap(rec.pid)
    return not is_running(rec.pid, rec.start_ticks)


def _signal_and_wait(rec: ProcessRecord, sig: signal.Signals, grace: float) -> bool:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(rec.pid, sig)
    deadline = time.monotonic() + grace
    while not _gone(rec):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop(records: Sequence[ProcessRecord], grace: float = 10.0) -> list[str]:
    """Stop each record's process group in the given order: SIGTERM, then SIGKILL after ``grace``.

    One at a time on purpose: kube-apiserver drains gracefully only while etcd is still up.
    Returns the names that needed SIGKILL (worth reporting: a clean shutdown should not).
    """
    killed = []
    for rec in records:
        if _gone(rec) or _signal_and_wait(rec, signal.SIGTERM, grace):
            continue
        killed.append(rec.name)
        _signal_and_wait(rec, signal.SIGKILL, grace)
    return killed


def terminate(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM a child we hold a handle on, SIGKILL it if it outlives ``grace`` seconds; reaped
    either way."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class LoggedChild:
    """A child the bed holds a handle on, its output appended to one log file."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self, cmd: Sequence[str], env: Mapping[str, str], cwd: Path) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=dict(env))
        return self.proc

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc, 15)
        self.proc = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class Process:
    """One long-running product process of a stack (driver, cni-shim-daemon, operator) with its
    log file, started from the repository root."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], log: Path) -> None:
        self.log = log
        with log.open("ab") as out:
            # Like the bed's own processes: an interrupted demo or test session leaves none behind.
            self.proc = subprocess.Popen(
                dying_with_parent(argv),
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """SIGSTOP for the block, SIGCONT after it (if it still runs): whatever asks it something
        meanwhile waits, which is how a test holds a caller inside a call without racing it."""
        self.proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            if self.alive():
                self.proc.send_signal(signal.SIGCONT)

    def output(self, tail: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-tail:]

    def stop(self) -> None:
        terminate(self.proc, 20)


def peak_rss_kib(pid: int) -> int | None:
    """VmHWM (peak resident set) of a live process, in KiB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return None


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        data = path.read_bytes()[-16384:]
    except FileNotFoundError:
        return "(no log written)"
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])
