"""Where a thick ADD/DEL spends its time inside cni-shim-daemon: cProfile over the real path.

    python -m bench.profile_cni [--cycles 30]

The daemon's own Dispatcher (live reads on, the deployed default) serves ADD then DEL of one
container in this process's main thread, so cProfile sees every call: the same Pod, two NADs
and ptp + host-local delegates as bench.thick_compare, the real API server and a real network
namespace. Reported: time in delegate processes, in API requests and in everything else, and
the three functions with the most time of their own, overall and within our code.
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import json
import pstats
import secrets
import sys
import time
from collections.abc import Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client

from bench import rails as bench_rails
from bench import thick_compare
from bench.common import network_namespace, standalone
from cni_shim.app import thin
from cni_shim.app.thick import NAD_READERS
from cni_shim.kube.daemon_client import ApiServer
from cni_shim.kube.views import LiveView
from cni_shim.node.execution import ProcessExecutor
from cni_shim.node.versioncache import VersionCache
from cni_shim.ports import KubeApi
from cni_shim.thick.dispatch import Dispatcher
from cni_shim.thick.metrics import Metrics
from testbed.bed import TestBed
from testbed.nodecni import make_cni_bin_dir
from testbed.tools import ToolSet

OURS = ("cni_shim", "sriov_contract", "sriov_lib")


class _LiveOnly:
    def __init__(self, api: ApiServer, metrics: Metrics, readers: Executor) -> None:
        self._api, self._metrics, self._readers = api, metrics, readers

    def live(self, *, prefetch: bool = True) -> KubeApi | None:
        return LiveView(
            self._api, self._metrics, self._readers
        )  # no informers here, nothing to prefetch from

    def cached(self) -> KubeApi | None:
        return None  # live reads on: ADD never uses the caches, DEL never reads the API


def _cumulative(stats: Mapping[Any, Any], module: str, name: str) -> float:
    return float(sum(v[3] for (f, _line, fn), v in stats.items() if f.endswith(module) and fn == name))


def hottest(stats: Mapping[Any, Any], count: int, within: tuple[str, ...] = ()) -> list[str]:
    rows = [
        (key, v) for key, v in stats.items() if not within or any(f"/{part}/" in key[0] for part in within)
    ]
    rows.sort(key=lambda kv: kv[1][2], reverse=True)
    return [
        f"{Path(f).name}:{line}({fn}) {v[2] * 1000:.1f} ms ({v[1]} calls)"
        for (f, line, fn), v in rows[:count]
    ]


def measure(
    bed: TestBed, tools: ToolSet, work: Path, cycles: int, dump: str = "", rails: int = 0
) -> dict[str, Any]:
    if rails:
        # bench.rails's Pod, its delegates one after another so that cProfile (this thread only) sees them all
        bin_dir = bench_rails.plugin_dir(work, tools)
        load = bench_rails.profiled_workload(bed, work, "bench-prof", rails)
        ns, args = load.namespace, load.args
    else:
        bin_dir = make_cni_bin_dir(work / "bin", tools)
        ns = f"bench-prof-{secrets.token_hex(3)}"
        pod, uid = thick_compare.workload(bed, ns, work / "ipam")
        args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={pod};K8S_POD_UID={uid}"
    config = {
        "binDir": str(bin_dir),
        "cniDir": str(work / "cache"),
        "delegates": [thick_compare.ptp("podnet", "10.90.0.0/24", work / "ipam")],
        "liveNetworkConfigOnAdd": True,
        **({"maxParallelDelegates": 1} if rails else {}),
    }
    metrics = Metrics()
    executor = VersionCache(ProcessExecutor())
    readers = ThreadPoolExecutor(NAD_READERS, thread_name_prefix="nad-read")
    dispatcher = Dispatcher(
        config,
        _LiveOnly(ApiServer.connect(str(bed.kubeconfig_for("admin"))), metrics, readers),
        metrics,
        lambda *_a, **_k: None,
        base_services=lambda env: thin.services(env)._replace(executor=executor, versions_for=None),
    )
    conf = base64.b64encode(
        json.dumps({"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "cni-shim"}).encode()
    ).decode()
    profiler = cProfile.Profile()
    with network_namespace() as netns:

        def request(command: str) -> None:
            env = {
                "CNI_COMMAND": command,
                "CNI_CONTAINERID": thick_compare.CID,
                "CNI_NETNS": netns,
                "CNI_IFNAME": "eth0",
                "CNI_ARGS": args,
                "CNI_PATH": str(bin_dir),
            }
            answer = dispatcher.serve(json.dumps({"env": env, "config": conf}).encode())
            if answer.status != 200:
                raise SystemExit(f"{command} failed: {answer.body[:500]!r}")

        for _ in range(3):
            request("ADD")
            request("DEL")
        start = time.perf_counter()
        profiler.enable()
        for _ in range(cycles):
            request("ADD")
            request("DEL")
        profiler.disable()
        wall = (time.perf_counter() - start) / cycles * 1000
    readers.shutdown()
    if rails:
        bench_rails.release(bed, ns)
    else:
        client.CoreV1Api(bed.api_client).delete_namespace(ns)
    if dump:
        profiler.dump_stats(dump)  # for `python -m pstats` or snakeviz
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    per = 1000 / cycles
    delegates = _cumulative(stats, "execution.py", "execute") * per
    # On this thread: the Pod GET and status PUT (the NAD reads run on the reader pool, beside it).
    api = sum(_cumulative(stats, "daemon_client.py", name) for name in ("get", "put", "post")) * per
    return {
        "cycles": cycles,
        "ms_per_cycle_profiled": wall,
        "delegates_ms": delegates,
        "api_ms": api,
        "rest_ms": wall - delegates - api,
        "hottest_overall": hottest(stats, 3),
        "hottest_ours": hottest(stats, 3, OURS),
    }


def report(r: Mapping[str, Any]) -> None:
    print(
        f"inside cni-shim-daemon, ADD+DEL under cProfile ({r['cycles']} cycles, live reads on), ms per cycle:"
    )
    print(
        f"  {r['ms_per_cycle_profiled']:.1f} total = delegates {r['delegates_ms']:.1f} + API {r['api_ms']:.1f} "
        f"+ the rest {r['rest_ms']:.1f}"
    )
    for what in ("hottest_overall", "hottest_ours"):
        for line in r[what]:
            print(f"  {what.replace('_', ' ')}: {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--dump", default="", help="also write the raw profile to this file")
    parser.add_argument(
        "--rails", type=int, default=0, help="bench.rails's Pod with this many shadows, delegates serial"
    )
    opts = parser.parse_args(argv)
    return standalone(
        "bench-prof-",
        lambda bed, tools, work: report(measure(bed, tools, work, opts.cycles, opts.dump, opts.rails)),
    )


if __name__ == "__main__":
    sys.exit(main())
