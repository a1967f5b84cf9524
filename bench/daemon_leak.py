"""cni-shim-daemon memory over many ADD/DEL cycles: is there a leak, and is it above multus-daemon's?

    python -m bench.daemon_leak [--cycles 10000] [--delegate static|recorder] [--no-multus]

The daemon runs against the test bed with informers on; each request names a real Pod (so every
ADD reads it and writes its network-status) and runs one cheap delegate: the Go `static` IPAM
plugin by default (about 4 ms per exec), or the Python `recorder` test plugin (about 60 ms). Two
clients post straight to the daemon's socket in the shape the shim forwards, each for its own
Pod and container, so both cores are busy. RSS is sampled after a warm-up and then at regular
intervals; the growth per 1000 cycles over the second half is what a leak would show.
multus-daemon (informers on, the same delegate, Pods and request shape on its own socket) is
measured the same way right after, as the peer.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client

from bench import thick_compare
from bench.common import network_namespace, rss_kib, standalone
from cni_shim.thick import forward
from testbed.bed import TestBed
from testbed.cni_daemon import DAEMON_RULES, DaemonProc
from testbed.nodecni import make_cni_bin_dir
from testbed.tools import ToolSet

CLIENTS = 2
WARMUP = 200
SAMPLES = 10
DELEGATES: Mapping[str, dict[str, Any]] = {
    "static": {"type": "static", "ipam": {"type": "static", "addresses": [{"address": "10.93.0.2/24"}]}},
    "recorder": {"type": "recorder", "logFile": os.devnull},
}


def pods(bed: TestBed, ns: str, count: int = CLIENTS) -> list[tuple[str, str]]:
    """`count` Pods on the bed's node in a new namespace `ns`, as (name, UID)."""
    core = client.CoreV1Api(bed.api_client)
    core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": ns}}))
    out = []
    for i in range(count):
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


class Target:
    """One daemon's socket and what a request to it carries (the shim's forwarded shape)."""

    def __init__(self, name: str, socket_path: str, bin_dir: Path, netns: str, conf: bytes) -> None:
        self.name, self.socket_path, self.bin_dir, self.netns, self.conf = (
            name,
            socket_path,
            bin_dir,
            netns,
            conf,
        )


def request(daemon: Target, command: str, ns: str, pod: tuple[str, str]) -> None:
    name, uid = pod
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": f"leak-{name}",
        "CNI_NETNS": daemon.netns,
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={name};K8S_POD_UID={uid}",
        "CNI_PATH": str(daemon.bin_dir),
    }
    body = json.dumps({"env": env, "config": base64.b64encode(daemon.conf).decode()}).encode()
    status, payload = forward.exchange(daemon.socket_path, "POST", "/cni", body, 60.0)
    if status != 200:
        raise SystemExit(f"{daemon.name} answered {command} with {status}: {payload[:500]!r}")


def _run(daemon: Target, ns: str, pods: list[tuple[str, str]], cycles: int) -> None:
    """`cycles` ADD+DEL pairs split over the clients, each on its own Pod."""
    failures: list[BaseException] = []

    def worker(pod: tuple[str, str], count: int) -> None:
        try:
            for _ in range(count):
                request(daemon, "ADD", ns, pod)
                request(daemon, "DEL", ns, pod)
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


def _sample(daemon: Target, pid: int, ns: str, pods: list[tuple[str, str]], cycles: int) -> dict[str, Any]:
    """RSS idle, after the warm-up and every cycles/SAMPLES cycles after it."""
    idle = rss_kib(pid)
    _run(daemon, ns, pods, WARMUP)
    samples = [(0, rss_kib(pid))]
    step = max(1, cycles // SAMPLES)
    done = 0
    while done < cycles:
        batch = min(step, cycles - done)
        _run(daemon, ns, pods, batch)
        done += batch
        samples.append((done, rss_kib(pid)))
    half = [s for s in samples if s[0] >= cycles // 2]
    growth = (half[-1][1] - half[0][1]) / max(1, half[-1][0] - half[0][0]) * 1000
    return {
        "rss_idle_kib": idle,
        "rss_after_warmup_kib": samples[0][1],
        "rss_end_kib": samples[-1][1],
        "rss_samples_kib": samples,
        "growth_kib_per_1000_cycles_second_half": growth,
    }


def measure(
    bed: TestBed, tools: ToolSet, work: Path, cycles: int, delegate: str, multus: bool = True
) -> dict[str, Any]:
    ns = f"bench-leak-{secrets.token_hex(3)}"
    residents = pods(bed, ns)
    mine, peer = side_by_side(
        bed,
        tools,
        work,
        DELEGATES[delegate],
        lambda target, pid: _sample(target, pid, ns, residents, cycles),
        live=False,
        multus=multus,
    )
    client.CoreV1Api(bed.api_client).delete_namespace(ns)
    out: dict[str, Any] = {"cycles": cycles, "delegate": delegate, **mine}
    if peer is not None:
        out["multus_daemon"] = peer
    return out


def side_by_side(
    bed: TestBed,
    tools: ToolSet,
    work: Path,
    delegate: Mapping[str, Any],
    run: Callable[[Target, int], dict[str, Any]],
    *,
    live: bool,
    multus: bool,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """`run` against cni-shim-daemon (informers on; `live` reads on ADD or not), then against
    multus-daemon given the same delegate as its cluster network; each gets its Target and PID."""
    bin_dir = make_cni_bin_dir(work / "bin", tools)
    user = f"bench-{work.name}-{secrets.token_hex(2)}"
    kubeconfig = bed.issue_identity(user, user)
    bed.grant(user, DAEMON_RULES)
    primary = {"cniVersion": "1.0.0", "name": "podnet", **delegate}
    config = {
        "binDir": str(bin_dir),
        "cniDir": str(work / "cache"),
        "kubeconfig": str(kubeconfig),
        "delegates": [primary],
        "liveNetworkConfigOnAdd": live,
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env["NODE_NAME"] = bed.node_name
    conf = json.dumps({"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "cni-shim"}).encode()
    (work / "daemon").mkdir()
    peer: dict[str, Any] | None = None
    with network_namespace() as netns:
        daemon = DaemonProc(work / "daemon", config, env).start()
        try:
            assert daemon.proc is not None
            mine = run(Target("cni-shim-daemon", daemon.socket_path, bin_dir, netns, conf), daemon.proc.pid)
        finally:
            daemon.stop()
        if multus:
            # The peer as bench.thick_compare runs it: its own node identity, informers, same Pods.
            peer_conf = {"binDir": str(bin_dir), "cniDir": str(work / "multus-cache"), "delegates": [primary]}
            with thick_compare.multus_daemon(bed, tools.require("multus"), work, peer_conf) as (sock, pid):
                shim = {"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "multus-shim"}
                target = Target(
                    "multus-daemon", str(sock / "multus.sock"), bin_dir, netns, json.dumps(shim).encode()
                )
                peer = run(target, pid)
    return mine, peer


def report(r: Mapping[str, Any]) -> None:
    print(
        f"cni-shim-daemon RSS over {r['cycles']} ADD+DEL cycles ({r['delegate']} delegate, real API server):"
    )
    print(
        f"  idle {r['rss_idle_kib'] / 1024:.1f} MiB, after {WARMUP} warm-up cycles "
        f"{r['rss_after_warmup_kib'] / 1024:.1f} MiB, at the end {r['rss_end_kib'] / 1024:.1f} MiB; "
        f"second half growth {r['growth_kib_per_1000_cycles_second_half']:.0f} KiB per 1000 cycles"
    )
    print(f"    MiB by cycle: {by_cycle(r['rss_samples_kib'])}")
    peer = r.get("multus_daemon")
    if peer:
        print(
            f"  multus-daemon, the same way: idle {peer['rss_idle_kib'] / 1024:.1f} MiB, after warm-up "
            f"{peer['rss_after_warmup_kib'] / 1024:.1f} MiB, at the end {peer['rss_end_kib'] / 1024:.1f} MiB; "
            f"second half growth {peer['growth_kib_per_1000_cycles_second_half']:.0f} KiB per 1000 cycles"
        )
        print(f"    MiB by cycle: {by_cycle(peer['rss_samples_kib'])}")


def by_cycle(samples: Sequence[Sequence[int]]) -> str:
    """The samples themselves, so a reader sees whether growth levels off or keeps climbing."""
    return ", ".join(f"{n}: {kib / 1024:.2f}" for n, kib in samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=10000)
    parser.add_argument("--delegate", choices=sorted(DELEGATES), default="static")
    parser.add_argument("--no-multus", action="store_true", help="measure cni-shim-daemon only")
    opts = parser.parse_args(argv)
    return standalone(
        "bench-leak-",
        lambda bed, tools, work: report(
            measure(bed, tools, work, opts.cycles, opts.delegate, multus=not opts.no_multus)
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
