"""Daemon memory under a burst: 100 ADDs arriving at once, then their 100 DELs (issue 36).

    python -m bench.burst [--pods 100] [--no-multus]

Multus's thick daemon has a long history of running out of memory under bursts; a node that
starts a DaemonSet or reschedules after a failure sends exactly this. Each of `--pods` real Pods
gets one ADD, all posted to the daemon's socket at the same moment in the shape the shim forwards
(live reads on for cni-shim-daemon, as deployed), then one DEL each, likewise. Reported: every
answer's status, the daemon's peak RSS (VmHWM, which also covers its start-up) and its RSS after
the burst, and the burst's wall time; multus-daemon, given the same Pods and delegate, right after.
The delegate is Go's `static` IPAM plugin, so the daemons' own memory is what is compared.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.common import rss_kib, standalone
from bench.daemon_leak import DELEGATES, Target, pods, request, side_by_side
from testbed.bed import TestBed
from testbed.tools import ToolSet

PODS = 100
# Issue 36's targets: our peak at most 150 MiB, and at most multus-daemon's in the same burst.
PEAK_MIB = 150


def _burst(daemon: Target, command: str, ns: str, residents: list[tuple[str, str]]) -> tuple[int, float]:
    """Every Pod's `command` at once; returns (answers that were 200, seconds until the last)."""
    start = threading.Event()
    answered = [0]
    lock = threading.Lock()

    def one(pod: tuple[str, str]) -> None:
        start.wait()
        try:
            request(daemon, command, ns, pod)
        except SystemExit:
            return  # a refusal is counted by its absence
        with lock:
            answered[0] += 1

    threads = [threading.Thread(target=one, args=(pod,)) for pod in residents]
    for t in threads:
        t.start()
    began = time.perf_counter()
    start.set()
    for t in threads:
        t.join()
    return answered[0], time.perf_counter() - began


def _measure_one(daemon: Target, pid: int, ns: str, residents: list[tuple[str, str]]) -> dict[str, Any]:
    idle = rss_kib(pid)
    added, add_s = _burst(daemon, "ADD", ns, residents)
    after_add = rss_kib(pid)
    deleted, del_s = _burst(daemon, "DEL", ns, residents)
    return {
        "requests": len(residents),
        "add_answered": added,
        "del_answered": deleted,
        "add_burst_s": add_s,
        "del_burst_s": del_s,
        "rss_idle_kib": idle,
        "rss_after_adds_kib": after_add,
        "rss_end_kib": rss_kib(pid),
        "rss_peak_kib": rss_kib(pid, "VmHWM"),
    }


def measure(bed: TestBed, tools: ToolSet, work: Path, count: int, multus: bool = True) -> dict[str, Any]:
    ns = f"bench-burst-{secrets.token_hex(3)}"
    residents = pods(bed, ns, count)
    mine, peer = side_by_side(
        bed,
        tools,
        work,
        DELEGATES["static"],
        lambda target, pid: _measure_one(target, pid, ns, residents),
        live=True,
        multus=multus,
    )
    client.CoreV1Api(bed.api_client).delete_namespace(ns)
    out: dict[str, Any] = {"pods": count, "cni-shim-daemon": mine}
    if peer is not None:
        out["multus-daemon"] = peer
    return out


def report(r: Mapping[str, Any]) -> None:
    print(f"{r['pods']} ADDs at once, then {r['pods']} DELs at once:")
    for name in ("cni-shim-daemon", "multus-daemon"):
        m = r.get(name)
        if not m:
            continue
        print(
            f"  {name}: answered {m['add_answered']}/{m['requests']} ADDs in {m['add_burst_s']:.1f} s and "
            f"{m['del_answered']}/{m['requests']} DELs in {m['del_burst_s']:.1f} s; RSS idle "
            f"{m['rss_idle_kib'] / 1024:.1f}, after the ADDs {m['rss_after_adds_kib'] / 1024:.1f}, end "
            f"{m['rss_end_kib'] / 1024:.1f}, peak {m['rss_peak_kib'] / 1024:.1f} MiB"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=PODS)
    parser.add_argument("--no-multus", action="store_true", help="measure cni-shim-daemon only")
    opts = parser.parse_args(argv)
    return standalone(
        "bench-burst-",
        lambda bed, tools, work: report(measure(bed, tools, work, opts.pods, multus=not opts.no_multus)),
    )


if __name__ == "__main__":
    sys.exit(main())
