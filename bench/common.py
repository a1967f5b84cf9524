"""What every benchmark shares: the test bed, a network namespace, sample statistics and RSS."""

from __future__ import annotations

import math
import os
import secrets
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.bed import controlplane
from tests.bed.bed import TestBed
from tests.bed.tools import ToolSet


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


def summary(samples: Sequence[float]) -> dict[str, Any]:
    """Median and nearest-rank p95 of milliseconds (or any unit), with the sample count."""
    ordered = sorted(samples)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return {"n": len(ordered), "median": statistics.median(ordered), "p95": p95}


def rss_kib(pid: int) -> int:
    """Resident set size of a live process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"process {pid} reports no VmRSS")


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
