"""cni-shim-daemon memory over many ADD/DEL cycles: is there a leak?

    python -m bench.daemon_leak [--cycles 10000] [--delegate static|recorder]

The daemon runs against the test bed with informers on; each request names a real Pod (so every
ADD reads it and writes its network-status) and runs one cheap delegate: the Go `static` IPAM
plugin by default (about 4 ms per exec), or the Python `recorder` test plugin (about 60 ms). Two
clients post straight to the daemon's socket in the shape the shim forwards, each for its own
Pod and container, so both cores are busy. RSS is sampled after a warm-up and then at regular
intervals; the growth per 1000 cycles over the second half is what a leak would show.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.common import rss_kib, standalone
from cni_shim.thick import forward
from tests.bed.bed import TestBed
from tests.bed.tools import ToolSet
from tests.support.cni import make_cni_bin_dir
from tests.support.cni_daemon import DAEMON_RULES, DaemonProc

CLIENTS = 2
WARMUP = 200
SAMPLES = 10
DELEGATES: Mapping[str, dict[str, Any]] = {
    "static": {"type": "static", "ipam": {"type": "static", "addresses": [{"address": "10.93.0.2/24"}]}},
    "recorder": {"type": "recorder", "logFile": os.devnull},
}


def _pods(bed: TestBed, ns: str) -> list[tuple[str, str]]:
    core = client.CoreV1Api(bed.api_client)
    core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": ns}}))
    out = []
    for i in range(CLIENTS):
        body = {
            "metadata": {"name": f"leak-{i}"},
            "spec": {
                "nodeName": bed.node_name,
                "containers": [{"name": "c", "image": "registry.invalid/none:0"}],
            },
        }
        pod = core.create_namespaced_pod(ns, client.V1Pod.model_validate(body))
        assert pod.metadata is not None
        out.append((f"leak-{i}", str(pod.metadata.uid)))
    return out


def _request(daemon: DaemonProc, command: str, ns: str, pod: tuple[str, str], conf: bytes) -> None:
    name, uid = pod
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": f"leak-{name}",
        "CNI_NETNS": "/var/run/netns/none",
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={name};K8S_POD_UID={uid}",
        "CNI_PATH": str(daemon.config["binDir"]),
    }
    body = json.dumps({"env": env, "config": base64.b64encode(conf).decode()}).encode()
    status, payload = forward.exchange(daemon.socket_path, "POST", "/cni", body, 60.0)
    if status != 200:
        raise SystemExit(f"cni-shim-daemon answered {command} with {status}: {payload[:500]!r}")


def _run(daemon: DaemonProc, ns: str, pods: list[tuple[str, str]], conf: bytes, cycles: int) -> None:
    """`cycles` ADD+DEL pairs split over the clients, each on its own Pod."""
    failures: list[BaseException] = []

    def worker(pod: tuple[str, str], count: int) -> None:
        try:
            for _ in range(count):
                _request(daemon, "ADD", ns, pod, conf)
                _request(daemon, "DEL", ns, pod, conf)
        except BaseException as exc:  # surfaced to the main thread below
            failures.append(exc)

    threads = [
        threading.Thread(target=worker, args=(pod, cycles // CLIENTS + (i < cycles % CLIENTS)))
        for i, pod in enumerate(pods)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


def measure(bed: TestBed, tools: ToolSet, work: Path, cycles: int, delegate: str) -> dict[str, Any]:
    bin_dir = make_cni_bin_dir(work / "bin", tools)
    user = f"bench-leak-{secrets.token_hex(2)}"
    kubeconfig = bed.issue_identity(user, user)
    bed.grant(user, DAEMON_RULES)
    primary = {"cniVersion": "1.0.0", "name": "podnet", **DELEGATES[delegate]}
    config = {
        "binDir": str(bin_dir),
        "cniDir": str(work / "cache"),
        "kubeconfig": str(kubeconfig),
        "delegates": [primary],
        "liveNetworkConfigOnAdd": False,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env["NODE_NAME"] = bed.node_name
    ns = f"bench-leak-{secrets.token_hex(3)}"
    pods = _pods(bed, ns)
    conf = json.dumps({"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "cni-shim"}).encode()
    (work / "daemon").mkdir()
    daemon = DaemonProc(work / "daemon", config, env).start()
    try:
        assert daemon.proc is not None
        pid = daemon.proc.pid
        idle = rss_kib(pid)
        _run(daemon, ns, pods, conf, WARMUP)
        samples = [(0, rss_kib(pid))]
        step = max(1, cycles // SAMPLES)
        done = 0
        while done < cycles:
            batch = min(step, cycles - done)
            _run(daemon, ns, pods, conf, batch)
            done += batch
            samples.append((done, rss_kib(pid)))
    finally:
        daemon.stop()
    client.CoreV1Api(bed.api_client).delete_namespace(ns)
    half = [s for s in samples if s[0] >= cycles // 2]
    growth = (half[-1][1] - half[0][1]) / max(1, half[-1][0] - half[0][0]) * 1000
    return {
        "cycles": cycles,
        "delegate": delegate,
        "rss_idle_kib": idle,
        "rss_after_warmup_kib": samples[0][1],
        "rss_end_kib": samples[-1][1],
        "rss_samples_kib": samples,
        "growth_kib_per_1000_cycles_second_half": growth,
    }


def report(r: Mapping[str, Any]) -> None:
    print(
        f"cni-shim-daemon RSS over {r['cycles']} ADD+DEL cycles ({r['delegate']} delegate, real API server):"
    )
    print(
        f"  idle {r['rss_idle_kib'] / 1024:.1f} MiB, after {WARMUP} warm-up cycles "
        f"{r['rss_after_warmup_kib'] / 1024:.1f} MiB, at the end {r['rss_end_kib'] / 1024:.1f} MiB; "
        f"second half growth {r['growth_kib_per_1000_cycles_second_half']:.0f} KiB per 1000 cycles"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=10000)
    parser.add_argument("--delegate", choices=sorted(DELEGATES), default="static")
    opts = parser.parse_args(argv)
    return standalone(
        "bench-leak-", lambda bed, tools, work: report(measure(bed, tools, work, opts.cycles, opts.delegate))
    )


if __name__ == "__main__":
    sys.exit(main())
