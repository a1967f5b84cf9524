"""Where a thin ADD and DEL spend their time: one cni-shim process per verb, as a runtime runs it.

    python -m bench.profile_thin [--cycles 20]

Each invocation is the launcher's `python -S` interpreter running cni_shim.main.run under
cProfile on bench.thick_compare's workload (ptp + host-local cluster network, two NADs, the real
API server, a real network namespace). Interpreter start-up is timed apart (VERSION, which
imports nothing else). Reported per verb, median ms of the invocations: the whole process, the
imports it makes, the API requests (TLS set-up included), the delegates, and the rest; then the
functions with the most time of their own, within our code and overall.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client

from bench import thick_compare
from bench.common import network_namespace, standalone
from bench.profile_cni import OURS, hottest
from testbed.bed import TestBed
from testbed.nodecni import make_cni_bin_dir
from testbed.tools import ToolSet

REPO = Path(__file__).resolve().parent.parent
# The launcher's program with cProfile around the invocation; os._exit is kept out so the profile
# is written, and the timer starts before cni_shim.main is imported.
DRIVER = """
import cProfile, os, sys
sys.path.insert(0, {root!r})
profile = cProfile.Profile()
profile.enable()
from cni_shim import main
status, out, err = main.run(dict(os.environ), sys.stdin.buffer.read)
profile.disable()
profile.dump_stats(os.environ["PROFILE_OUT"])
sys.stdout.write(out)
sys.stderr.write(err)
sys.exit(status)
"""
PARTS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "imports": (("<frozen importlib._bootstrap>", "_find_and_load"),),
    "api": (("thin_client.py", "request"),),
    "delegates": (("execution.py", "execute"),),
}


def _cumulative(stats: Mapping[Any, Any], parts: tuple[tuple[str, str], ...]) -> float:
    # cProfile counts a recursive function's (a nested import's) time once, at the outermost call.
    return 1000.0 * sum(
        float(v[3])
        for (path, _line, name), v in stats.items()
        for suffix, fn in parts
        if path.endswith(suffix) and name == fn
    )


def measure(
    bed: TestBed, tools: ToolSet, work: Path, cycles: int, root: Path = REPO, dump: Path | None = None
) -> dict[str, Any]:
    bin_dir = make_cni_bin_dir(work / "bin", tools)
    load = thick_compare.profiled_workload(bed, work, "bench-pthin")
    conf = {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "cni-shim",
        "binDir": str(bin_dir),
        "cniDir": str(work / "cache"),
        "kubeconfig": str(load.kubeconfig),
        "delegates": [thick_compare.ptp("podnet", "10.90.0.0/24", work / "ipam")],
    }
    driver = DRIVER.format(root=str(root))
    python = sys.executable
    samples: dict[str, list[dict[str, float]]] = {"ADD": [], "DEL": []}
    merged: dict[str, pstats.Stats | None] = {"ADD": None, "DEL": None}
    startup = []
    for _ in range(15):
        start = time.perf_counter()
        subprocess.run([python, "-S", "-c", "pass"], check=True)
        startup.append((time.perf_counter() - start) * 1000)
    with network_namespace() as netns:
        for index in range(cycles + 2):
            for verb in ("ADD", "DEL"):
                out = work / f"{verb}-{index}.prof"
                env = {
                    "PATH": os.environ.get("PATH", ""),
                    "CNI_COMMAND": verb,
                    "CNI_CONTAINERID": thick_compare.CID,
                    "CNI_NETNS": netns,
                    "CNI_IFNAME": "eth0",
                    "CNI_ARGS": load.args,
                    "CNI_PATH": str(bin_dir),
                    "PROFILE_OUT": str(out),
                }
                start = time.perf_counter()
                done = subprocess.run(
                    [python, "-S", "-c", driver],
                    input=json.dumps(conf).encode(),
                    env=env,
                    capture_output=True,
                    check=False,
                )
                wall = (time.perf_counter() - start) * 1000
                if done.returncode != 0:
                    raise SystemExit(f"thin {verb} failed: {done.stdout.decode()}{done.stderr.decode()}")
                if index < 2:
                    continue  # warm-up: bytecode caches, the API server's first answers
                stats = pstats.Stats(str(out))
                raw = stats.stats  # type: ignore[attr-defined]
                row = {"wall": wall, **{part: _cumulative(raw, keys) for part, keys in PARTS.items()}}
                samples[verb].append(row)
                if merged[verb] is None:
                    merged[verb] = stats
                else:
                    merged[verb].add(str(out))  # type: ignore[union-attr]
    client.CoreV1Api(bed.api_client).delete_namespace(load.namespace)
    result: dict[str, Any] = {"cycles": cycles, "startup_ms": statistics.median(startup)}
    for verb, rows in samples.items():
        median = {part: statistics.median(r[part] for r in rows) for part in rows[0]}
        merged_stats = merged[verb]
        assert merged_stats is not None
        if dump is not None:
            merged_stats.dump_stats(str(dump / f"thin-{verb}.prof"))
        raw = merged_stats.stats  # type: ignore[attr-defined]
        per = {k: (v[0], v[1], v[2] / len(rows), v[3] / len(rows), v[4]) for k, v in raw.items()}
        result[verb] = {
            **median,
            "hottest_ours": hottest(per, 8, OURS),
            "hottest_overall": hottest(per, 8),
        }
    return result


def report(r: Mapping[str, Any]) -> None:
    print(
        f"thin cni-shim, {r['cycles']} ADD+DEL, median ms per invocation; interpreter start {r['startup_ms']:.1f}"
    )
    for verb in ("ADD", "DEL"):
        v = r[verb]
        rest = v["wall"] - r["startup_ms"] - v["imports"] - v["api"] - v["delegates"]
        print(
            f"  {verb}: {v['wall']:.1f} = start {r['startup_ms']:.1f} + imports {v['imports']:.1f} + "
            f"API {v['api']:.1f} + delegates {v['delegates']:.1f} + rest {rest:.1f}  (profiled)"
        )
        for what in ("hottest_ours", "hottest_overall"):
            for line in v[what]:
                print(f"    {what.replace('_', ' ')}: {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument(
        "--root", type=Path, default=REPO, help="the checkout whose cni_shim runs (compare two)"
    )
    parser.add_argument(
        "--dump", type=Path, help="also write the merged profiles here (thin-ADD.prof, thin-DEL.prof)"
    )
    opts = parser.parse_args(argv)
    return standalone(
        "bench-pthin-",
        lambda bed, tools, work: report(measure(bed, tools, work, opts.cycles, opts.root, opts.dump)),
    )


if __name__ == "__main__":
    sys.exit(main())
