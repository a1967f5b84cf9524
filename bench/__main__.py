"""`make bench`: every benchmark in one run on one test bed, a table on stdout and a JSON record.

    python -m bench                      # the full run (about 15 minutes on 2 cores)
    python -m bench --quick              # small sizes, a couple of minutes
    python -m bench --only cni,prepare   # a selection (cni, rails, burst, prepare, scale, leak, operator, cluster,
                                         # podready)
    python -m bench --only cluster --cluster-nodes 10,100,1000 --cluster-operator 500x1000
                                         # issue 34's full series (BENCH_CLUSTER_NODES also sets it)

Results go to bench/results/<date>-<gitsha>.json with the machine's facts and every figure;
issue #21's targets table ends the run (bench.report: figure, peer, ours, target, met/MISSED, and
under a miss the profile entry that explains it); `python -m bench.report <json>` puts that
table into docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import burst, cluster, daemon_leak, podready, prepare, rails, scale, thick_compare
from bench import operator as operator_bench
from bench.common import test_bed
from bench.report import printout, targets, verdict
from testbed.bed import TestBed
from testbed.tools import ToolSet

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
# podready last: its real kubelet takes over the bed's Node, which the others use as a bare Node.
# cluster first: it counts the bytes a node's driver and daemon read, and the other parts'
# leftovers (namespaces still being deleted) would be counted too (ten times the bytes at N = 10).
BENCHES = ("cluster", "cni", "rails", "burst", "prepare", "scale", "leak", "operator", "podready")


def _run(*cmd: str) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=REPO).stdout.strip()
    except OSError:
        return ""


def machine_facts(tools: ToolSet) -> dict[str, Any]:
    versions = {}
    for line in (REPO / "scripts" / "versions.env").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            versions[key.strip()] = value.strip()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_mib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "go": _run("go", "version"),
        "components": versions,
        "tool_dirs": {k: str(v) for k, v in tools.directories.items()},
        "auto_sriov": metadata.version("auto-sriov"),
        "git": _run("git", "rev-parse", "HEAD"),
        "git_dirty": bool(_run("git", "status", "--porcelain", "--untracked-files=no")),
    }


def save_record(
    facts: dict[str, Any],
    seconds: dict[str, float],
    results: dict[str, Any],
    checked: list[dict[str, Any]],
    *,
    quick: bool,
    suffix: str = "",
) -> Path:
    """bench/results/<date>-<gitsha>[-quick]<suffix>.json: the machine, every figure, the targets."""
    now = datetime.datetime.now(datetime.UTC)
    record = {
        "date": now.isoformat(timespec="seconds"),
        "quick": quick,
        "machine": facts,
        "seconds": seconds,
        "results": results,
        "targets": [{**row, "result": verdict(row)} for row in checked],
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{now:%Y-%m-%d}-{facts['git'][:10]}{'-quick' if quick else ''}{suffix}.json"
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"results: {path.relative_to(REPO)}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not a result")
    parser.add_argument(
        "--only", default=",".join(BENCHES), help=f"comma-separated subset of {', '.join(BENCHES)}"
    )
    parser.add_argument("--cycles", type=int, help="CNI ADD+DEL cycles per setup (default 200, quick 20)")
    parser.add_argument("--prepare-repeats", type=int, help="prepares per claim size (default 10, quick 2)")
    parser.add_argument("--pods", type=int, help="scale: Pods of 8 VFs each (default 1000, quick 100)")
    parser.add_argument("--leak-cycles", type=int, help="daemon ADD/DEL cycles (default 10000, quick 1000)")
    parser.add_argument(
        "--cluster-nodes",
        default=os.environ.get("BENCH_CLUSTER_NODES", ""),
        help="cluster: the N series of other nodes (default 10,50, quick 5; issue 34's is 10,100,1000)",
    )
    parser.add_argument("--cluster-operator", default="", help="cluster: also the operator at PxN (500x1000)")
    parser.add_argument(
        "--podready-cycles", type=int, help="podready: eight-pair Pods per side (default 5, quick 2)"
    )
    parser.add_argument("--no-save", action="store_true", help="print only; write no results file")
    opts = parser.parse_args(argv)
    chosen = [b for b in opts.only.split(",") if b]
    unknown = set(chosen) - set(BENCHES)
    if unknown:
        parser.error(f"unknown benchmark(s) {sorted(unknown)}; choose from {', '.join(BENCHES)}")

    def pick(value: int | None, full: int, quick: int) -> int:
        return value if value is not None else quick if opts.quick else full

    tools = ToolSet()
    runs: dict[str, Callable[[TestBed, Path], Any]] = {
        "cni": lambda bed, work: thick_compare.measure(bed, tools, work, pick(opts.cycles, 200, 20), 5),
        "rails": lambda bed, work: rails.measure(bed, tools, work, pick(None, 30, 5), 3, rails.RAILS),
        "burst": lambda bed, work: burst.measure(bed, tools, work, burst.PODS),
        "prepare": lambda bed, work: prepare.measure(
            bed, work, (1, 8, 32), pick(opts.prepare_repeats, 10, 2)
        ),
        "scale": lambda bed, work: scale.measure(bed, pick(opts.pods, 1000, 100), 8, work),
        "leak": lambda bed, work: daemon_leak.measure(
            bed, tools, work, pick(opts.leak_cycles, 10000, 1000), "static"
        ),
        "operator": lambda bed, work: operator_bench.measure(bed, pick(None, 50, 10), pick(None, 20, 4)),
        "cluster": lambda bed, work: cluster.measure(
            bed,
            cluster.series(opts.cluster_nodes, opts.quick),
            cluster.NODE0_PODS,
            work,
            cluster.operator_size(opts.cluster_operator),
            clean_up=cluster.shared_bed() or chosen[-1] != "cluster",
        ),
        "podready": lambda bed, work: podready.measure(bed, tools, work, pick(opts.podready_cycles, 5, 2)),
    }
    reports: dict[str, Callable[[Any], None]] = {
        "cni": thick_compare.report,
        "rails": rails.report,
        "burst": burst.report,
        "prepare": prepare.report,
        "scale": scale.report,
        "leak": daemon_leak.report,
        "operator": operator_bench.report,
        "cluster": cluster.report,
        "podready": podready.report,
    }
    facts = machine_facts(tools)  # before running: the code measured is the code at the start
    results: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    # /var/tmp, not tmpfs: checkpoint writes are fsync'd as on a node's disk.
    with tempfile.TemporaryDirectory(prefix="bench-", dir="/var/tmp") as scratch, test_bed(tools) as bed:
        for name in chosen:
            print(f"== {name} ==", flush=True)
            work = Path(scratch) / name
            work.mkdir()
            start = time.monotonic()
            results[name] = runs[name](bed, work)
            seconds[name] = time.monotonic() - start
            reports[name](results[name])
            print(f"({name}: {seconds[name]:.0f} s)", flush=True)
    checked = targets(results)
    print("== targets (issue #21): result, figure, ours, peer in this run, target ==")
    printout(checked)
    if not opts.no_save:
        save_record(facts, seconds, results, checked, quick=opts.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
