"""What every benchmark shares: the test bed, a network namespace, a multus-daemon process, sample
statistics and RSS."""

from __future__ import annotations

import math
import os
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testbed import controlplane
from testbed.bed import TestBed
from testbed.tools import ToolSet


@contextmanager
def test_bed(tools: ToolSet) -> Iterator[TestBed]:
    """The bed TESTBED_STATE names, or a fresh one stopped afterwards."""
    state = os.environ.get("TESTBED_STATE")
    if state:
        yield TestBed.attach(Path(state), tools)
        return
    bed = controlplane.start(tools=tools, run_id=controlplane.new_run_id("bench"))
    try:
        yield bed
    finally:
        bed.stop()


@contextmanager
def network_namespace() -> Iterator[str]:
    name = f"bench-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield f"/run/netns/{name}"
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@contextmanager
def multus_daemon_process(
    multus_dir: Path, config: Path, socket_dir: Path, log_path: Path, node: str
) -> Iterator[int]:
    """multus-daemon on ``config`` until its socket is up (yields its process ID); ended on exit.

    Its own session, as cni-shim-daemon gets (testbed.cni_daemon): with the kernel's
    autogroup scheduling a session is a CPU-share unit, and sharing the caller's session would
    hand one daemon's delegates a different share of a busy machine than the other's.
    """
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(multus_dir / "multus-daemon"), "-config", str(config)],
            env={"PATH": os.environ.get("PATH", ""), "MULTUS_NODE_NAME": node},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while not (socket_dir / "multus.sock").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"multus-daemon did not come up:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        yield proc.pid
    finally:
        end_process(proc)


def end_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 20 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def summary(samples: Sequence[float]) -> dict[str, Any]:
    """Median and nearest-rank p95 of milliseconds (or any unit), with the sample count."""
    ordered = sorted(samples)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return {"n": len(ordered), "median": statistics.median(ordered), "p95": p95}


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """Resident set size of a live process, from /proc; `VmHWM` is its peak so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"process {pid} reports no {field}")


def standalone(prefix: str, run: Callable[[TestBed, ToolSet, Path], None]) -> int:
    """One benchmark on its own: a bed, the tools and a scratch directory removed afterwards."""
    tools = ToolSet()
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        with test_bed(tools) as bed:
            run(bed, tools, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0
