"""Wall-clock phases of a thick ADD/DEL, from the shim's fork to its exit, through the real daemon.

    python -m bench.spans_cni [--cycles 60] [--rails N]

cProfile (bench.profile_cni) counts CPU per function in one thread; this shows where a request
waits. The daemon's own `run` serves in this process's main thread (server, dispatcher,
informers, Event queue and logs exactly as deployed, live reads on), a client thread runs the
real thin-launcher shim once per verb (ADD then DEL, same workload as bench.thick_compare), and
timers wrapped around the daemon's seams record each phase: the shim's start-up until the
daemon accepts, HTTP parsing, request decode, each API call, the
wait for the NAD reads, the delegate-cache I/O, each delegate process (spawn to exit), the log
line, the reply, and what is left (the core's own Python). Medians per request, in ms.

With `--rails N` the Pod is bench.rails's instead: N managed shadows (Go ptp standing in for
sriov-cni), so the guard, the waves and the per-rail costs show; the delegates then run on
several threads, so "delegate waves" is their wall time on the request's thread and "delegate
exec (all threads)" the sum over every delegate process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubernetes import client

from bench import rails as bench_rails
from bench import thick_compare
from bench.common import network_namespace, standalone
from cni_shim import daemon, launcher
from cni_shim.app import config, thick
from cni_shim.handler import add, delete
from cni_shim.kube.daemon_client import ApiServer
from cni_shim.kube.views import LiveView
from cni_shim.node import execution
from cni_shim.node.cache import FileCacheStore
from cni_shim.thick import dispatch, forward, server
from cni_shim.thick.metrics import Metrics
from testbed.bed import TestBed
from testbed.cni_daemon import shim_conf
from testbed.nodecni import make_cni_bin_dir
from testbed.tools import ToolSet

# Leaf phases on the request's own thread; "core (the rest)" is the request minus these.
LEAVES = (
    "decode",
    "pod GET",
    "NAD wait",
    "status PUT",
    "cache I/O",
    "delegate exec",
    "delegate waves",
    "log",
    "metrics",
)
# Counted on every thread: the delegates of a wave run on the fan-out's threads.
ANY_THREAD = ("delegate exec (all threads)", "cache I/O (all threads)")
EVENT = "Event POST (queue worker)"
_CACHE_IO = ("save_plan", "load_plan", "remove_plan", "save_result", "load_result", "remove_result")


class Spans:
    """Timers patched around the daemon's seams; every span is (thread, start, end, label)."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, float, float, str]] = []
        self._undo: list[Callable[[], None]] = []

    def record(self, label: str, start: float, end: float) -> None:
        self.spans.append((threading.get_ident(), start, end, label))

    def wrap(self, owner: Any, attr: str, label: str | Callable[..., str]) -> None:
        original = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.record(label(*args) if callable(label) else label, start, time.perf_counter())

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, original))

    def wrap_iterator(self, owner: Any, attr: str, label: str) -> None:
        """Each step of the returned iterator is a span (the NADs are awaited as they are consumed)."""
        original = getattr(owner, attr)
        spans = self

        def stepped(*args: Any, **kwargs: Any) -> Iterator[Any]:
            inner = original(*args, **kwargs)
            while True:
                start = time.perf_counter()
                try:
                    item = next(inner)
                except StopIteration:
                    return
                finally:
                    spans.record(label, start, time.perf_counter())
                yield item

        setattr(owner, attr, stepped)
        self._undo.append(lambda: setattr(owner, attr, original))

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()


def _api_label(_api: ApiServer, path: str, *_rest: Any) -> str:
    return "NAD GET (reader pool)" if "network-attachment-definitions" in path else "pod GET"


def instrument(spans: Spans) -> None:
    spans.wrap(server.Server, "_handle", "handler")
    spans.wrap(dispatch.Dispatcher, "serve", "serve")
    spans.wrap(dispatch, "decode_request", "decode")
    spans.wrap(ApiServer, "get", _api_label)
    spans.wrap(ApiServer, "put", "status PUT")
    spans.wrap(ApiServer, "post", EVENT)
    spans.wrap_iterator(LiveView, "get_nads", "NAD wait")
    spans.wrap(execution, "spawn", "delegate exec")
    spans.wrap(add, "_add_wave", "delegate waves")
    spans.wrap(delete, "delete_plan", "delegate waves")
    spans.wrap(daemon.JsonLog, "__call__", "log")
    spans.wrap(Metrics, "request", "metrics")
    for name in _CACHE_IO:
        spans.wrap(FileCacheStore, name, "cache I/O")


def per_request(
    spans: list[tuple[int, float, float, str]], windows: list[tuple[float, float, str]]
) -> dict[str, dict[str, float]]:
    """Median ms per request of each phase, by verb; an Event POST (written after the reply) counts
    for the request it follows."""
    rows: dict[str, list[dict[str, float]]] = {"ADD": [], "DEL": []}
    for index, (start, end, verb) in enumerate(windows):
        until = windows[index + 1][0] if index + 1 < len(windows) else end + 1.0
        inside = [s for s in spans if start <= s[1] <= (until if s[3] == EVENT else end)]
        serve = next((s for s in inside if s[3] == "serve"), None)
        handler = next((s for s in inside if s[3] == "handler"), None)
        if serve is None or handler is None:
            continue
        row: dict[str, float] = {}
        waves = [(s0, s1) for thread, s0, s1, label in inside if label == "delegate waves"]
        for thread, s0, s1, label in inside:
            if label in ("delegate exec", "cache I/O") and serve[1] <= s0 <= serve[2]:
                every = f"{label} (all threads)"
                row[every] = row.get(every, 0.0) + (s1 - s0) * 1000
            if label in LEAVES and (thread != serve[0] or not serve[1] <= s0 <= serve[2]):
                continue  # the log line after the answer is the reply's
            if label != "delegate waves" and any(w0 <= s0 and s1 <= w1 for w0, w1 in waves):
                continue  # inside a wave: counted by the wave
            row[label] = row.get(label, 0.0) + (s1 - s0) * 1000
        # A worker's handler starts as its accept() returns.
        row["shim start to accept"] = (handler[1] - start) * 1000
        row["HTTP parse, body read"] = (serve[1] - handler[1]) * 1000
        row["core (the rest)"] = (serve[2] - serve[1]) * 1000 - sum(row.get(k, 0.0) for k in LEAVES)
        row["reply write"] = (handler[2] - serve[2]) * 1000
        row["reply to shim exit"] = (end - handler[2]) * 1000
        row["total (runtime's view)"] = (end - start) * 1000
        rows[verb].append(row)
    return {
        verb: {k: statistics.median(r.get(k, 0.0) for r in got) for k in sorted({k for r in got for k in r})}
        for verb, got in rows.items()
        if got
    }


def measure(bed: TestBed, tools: ToolSet, work: Path, cycles: int, rails: int = 0) -> dict[str, Any]:
    if rails:
        bin_dir = bench_rails.plugin_dir(work, tools)
        shim = bin_dir / "cni-shim"
        load = bench_rails.profiled_workload(bed, work, "bench-spans", rails)
    else:
        bin_dir = make_cni_bin_dir(work / "bin", tools)
        shim = launcher.install(bin_dir / "cni-shim")
        load = thick_compare.profiled_workload(bed, work, "bench-spans")
    socket_dir = work / "sock"
    raw = {
        "socketDir": str(socket_dir),
        "binDir": str(bin_dir),
        "cniDir": str(work / "cache"),
        "kubeconfig": str(load.kubeconfig),
        "delegates": [thick_compare.ptp("podnet", "10.90.0.0/24", work / "ipam")],
        "liveNetworkConfigOnAdd": True,
    }
    conf = config.load_config(_write(work / "daemon-config.json", raw), {"NODE_NAME": bed.node_name})
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    spans = Spans()
    windows: list[tuple[float, float, str]] = []
    failure: list[BaseException] = []
    # Left open: the informer threads may still log while the daemon stops.
    log = (work / "daemon.log").open("w")
    with network_namespace() as netns:

        def drive() -> None:
            try:
                while not _ready(str(socket_dir / forward.SOCKET_NAME)):
                    time.sleep(0.05)
                for index in range(5 + cycles):
                    for verb in ("ADD", "DEL"):
                        start = time.perf_counter()
                        thick_compare.cni(shim, verb, shim_conf(socket_dir), netns, load.args, bin_dir)
                        if index >= 5:
                            windows.append((start, time.perf_counter(), verb))
            except BaseException as exc:
                failure.append(exc)
            finally:
                os.kill(os.getpid(), signal.SIGTERM)

        instrument(spans)
        try:
            threading.Thread(target=drive, name="client", daemon=True).start()
            thick.run(conf, env, test_hooks=False, log=daemon.JsonLog(log))
        finally:
            spans.restore()
    if rails:
        bench_rails.release(bed, load.namespace)
    else:
        client.CoreV1Api(bed.api_client).delete_namespace(load.namespace)
    if failure:
        raise failure[0]
    return {"cycles": cycles, "rails": rails, "ms_median": per_request(spans.spans, windows)}


def _write(path: Path, doc: dict[str, Any]) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def _ready(socket: str) -> bool:
    with contextlib.suppress(OSError):
        return forward.exchange(socket, "GET", "/readyz", b"", 1.0)[0] == 200
    return False


ORDER = (
    "total (runtime's view)",
    "shim start to accept",
    "HTTP parse, body read",
    "serve",
    *LEAVES,
    "core (the rest)",
    "reply write",
    "reply to shim exit",
    *ANY_THREAD,
    "NAD GET (reader pool)",
    EVENT,
)


def report(r: dict[str, Any]) -> None:
    per = r["ms_median"]
    pod = f", a Pod with {r['rails']} managed shadows" if r.get("rails") else ""
    print(f"thick ADD/DEL wall-clock phases through the real daemon ({r['cycles']} cycles{pod}), median ms:")
    print(f"  {'phase':30s} {'ADD':>7s} {'DEL':>7s}")
    for label in ORDER:
        add, dele = (per.get(v, {}).get(label, 0.0) for v in ("ADD", "DEL"))
        print(f"  {label:30s} {add:7.2f} {dele:7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=60)
    parser.add_argument("--rails", type=int, default=0, help="bench.rails's Pod with this many shadows")
    opts = parser.parse_args(argv)
    return standalone(
        "bench-spans-",
        lambda bed, tools, work: report(measure(bed, tools, work, opts.cycles, opts.rails)),
    )


if __name__ == "__main__":
    sys.exit(main())
