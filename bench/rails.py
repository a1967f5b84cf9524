"""Multi-rail Pods: ADD+DEL of one Pod with 1, 2, 4 and 8 managed VFs, cni-shim thick (live reads)
beside Multus thick given the same NADs (issue 36).

    python -m bench.rails [--cycles 30] [--warmup 3] [--rails 1,2,4,8] [--before <checkout>]

Per rail count: a Pod selecting that many managed shadows (each a frozen static sriov config with
its own host-local pool, Pod ownerReference, protection finalizer and registry entry, as the
driver writes them), so cni-shim's guard checks each, and Multus reads them as the ordinary NADs
they are to it. cni-shim runs the shadows at once (cni_shim.core.delegatewaves); Multus runs them
one after another. The setups take turns cycle by cycle, in one network namespace.

Simulated hardware: this machine has no VFs, so the `sriov` delegate is Go's ptp plugin under
that name (it ignores `deviceID`): like sriov-cni it moves an interface into the Pod and runs
host-local. On a node, sriov-cni moves a VF netdev instead; the overlap gained is of the same kind.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.common import network_namespace, standalone, summary
from bench.thick_compare import (
    MULTUS_THICK,
    OURS_LIVE,
    Setup,
    SetupMaker,
    Workload,
    cpu_means,
    process_cpu_ms,
    ptp,
    run_cycles,
    warm_up,
)
from cni_shim import launcher
from sriov_contract import keys
from testbed.apiobjects import as_object, items_of
from testbed.bed import TestBed
from testbed.cni_daemon import DAEMON_RULES
from testbed.managed_shadows import managed_shadow, registry_annotation, rendered_sriov_config
from testbed.nodecni import make_cni_bin_dir
from testbed.tools import ToolSet

RAILS = (1, 2, 4, 8)
OURS_SERIAL = "cni-shim thick, live, maxParallelDelegates 1"
OURS_BEFORE = "cni-shim thick, live, the --before checkout's daemon"
# Issue 36's targets: at eight rails at most 0.40 x Multus (median and p95), never above 1.00 at one.
TARGET_AT_8 = 0.40
TARGET_AT_1 = 1.00


def _pod_with_rails(bed: TestBed, ns: str, rails: int, ipam_dir: Path) -> str:
    """A Pod on the bed's node selecting `rails` managed shadows; returns its CNI_ARGS."""
    core = client.CoreV1Api(bed.api_client)
    custom = client.CustomObjectsApi(bed.api_client)
    core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": ns}}))
    body = {
        "metadata": {"name": "rails"},
        "spec": {
            "nodeName": bed.node_name,
            "containers": [{"name": "c", "image": "registry.invalid/none:0"}],
        },
    }
    pod = core.create_namespaced_pod(ns, client.V1Pod.model_validate(body))
    assert pod.metadata is not None
    uid = str(pod.metadata.uid)
    selections, entries = [], []
    for i in range(rails):
        pci = f"0000:3b:{i:02x}.1"
        ipam = {"type": "host-local", "subnet": f"10.92.{i}.0/24", "dataDir": str(ipam_dir)}
        shadow = managed_shadow(
            namespace=ns,
            pod_name="rails",
            pod_uid=uid,
            node=bed.node_name,
            pci=pci,
            interface=f"dra{i}",
            seed=f"{ns}-{i}",
            config=rendered_sriov_config(pci, name=f"rail-{i}", ipam=ipam),
        )
        created = as_object(
            custom.create_namespaced_custom_object(
                "k8s.cni.cncf.io", "v1", ns, "network-attachment-definitions", shadow["nad"]
            )
        )
        selections.append(shadow["selection"])
        entries.append({**shadow["entry"], "uid": created["metadata"]["uid"]})
    annotations = {
        keys.NETWORKS_ANNOTATION: json.dumps(selections),
        keys.REGISTRY_ANNOTATION: registry_annotation(uid, entries),
    }
    core.patch_namespaced_pod("rails", ns, {"metadata": {"annotations": annotations}})
    return f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME=rails;K8S_POD_UID={uid}"


def profiled_workload(bed: TestBed, work: Path, prefix: str, rails: int) -> Workload:
    """The rails Pod plus an identity with the daemon's rights, for the single-setup profilers."""
    ns = f"{prefix}-{secrets.token_hex(3)}"
    args = _pod_with_rails(bed, ns, rails, work / "ipam")
    user = f"{prefix}-{secrets.token_hex(2)}"
    kubeconfig = bed.issue_identity(user, user)
    bed.grant(user, DAEMON_RULES)
    return Workload(ns, args, kubeconfig)


def release(bed: TestBed, ns: str) -> None:
    """The driver's part at the end: the shadows' finalizers go, then the namespace."""
    custom = client.CustomObjectsApi(bed.api_client)
    listing = custom.list_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", ns, "network-attachment-definitions"
    )
    for nad in items_of(listing):
        custom.patch_namespaced_custom_object(
            "k8s.cni.cncf.io",
            "v1",
            ns,
            "network-attachment-definitions",
            nad["metadata"]["name"],
            {"metadata": {"finalizers": None}},
        )
    client.CoreV1Api(bed.api_client).delete_namespace(ns)


def plugin_dir(work: Path, tools: ToolSet) -> Path:
    """The node's plugins with Go ptp standing in for sriov-cni (see the module docstring)."""
    bin_dir = make_cni_bin_dir(work / "bin", tools)
    (bin_dir / "sriov").unlink(missing_ok=True)
    (bin_dir / "sriov").symlink_to(bin_dir / "ptp")
    launcher.install(bin_dir / "cni-shim")
    multus_dir = tools.require("multus")
    shutil.copy(multus_dir / "multus-shim", bin_dir / "multus-shim")
    return bin_dir


def measure(
    bed: TestBed,
    tools: ToolSet,
    work: Path,
    cycles: int,
    warmup: int,
    rails: tuple[int, ...],
    before: Path | None = None,
) -> dict[str, Any]:
    """`before`: another checkout's cni-shim-daemon, measured beside this one as OURS_BEFORE."""
    bin_dir = plugin_dir(work, tools)
    primary = ptp("podnet", "10.90.0.0/24", work / "ipam")
    common = {"binDir": str(bin_dir), "delegates": [primary]}
    out: dict[str, Any] = {"cycles": cycles, "cores": os.cpu_count(), "rails": {}}
    control_plane = [p.pid for p in bed.state.processes if p.name in ("kube-apiserver", "etcd")]

    def server_cpu() -> float:
        return sum(process_cpu_ms(pid) for pid in control_plane)

    with ExitStack() as stack:
        netns = stack.enter_context(network_namespace())
        made = SetupMaker(bed, work, stack, bin_dir, tools.require("multus"), common, secrets.token_hex(2))
        ours, multus = made.ours(OURS_LIVE, True), made.multus_thick(MULTUS_THICK)
        # The same daemon in Multus's serial order: what the waves themselves are worth.
        serial_work = work / "serial"
        serial_work.mkdir()
        serial = SetupMaker(
            bed,
            serial_work,
            stack,
            bin_dir,
            tools.require("multus"),
            {**common, "maxParallelDelegates": 1},
            secrets.token_hex(2),
        ).ours(OURS_SERIAL, True)
        setups = [ours, serial, multus]
        if before is not None:
            # Another checkout's daemon, same config and Pods: a before/after pair in one run.
            before_work = work / "before"
            before_work.mkdir()
            setups.append(
                SetupMaker(
                    bed,
                    before_work,
                    stack,
                    bin_dir,
                    tools.require("multus"),
                    common,
                    secrets.token_hex(2),
                ).ours(OURS_BEFORE, True, executable=before)
            )
        for count in rails:
            ns = f"bench-rails{count}-{secrets.token_hex(3)}"
            args = _pod_with_rails(bed, ns, count, work / "ipam")
            for setup in setups:
                setup.samples.clear()
                setup.windows.clear()
                setup.cpu.clear()
            warm_up(setups, netns, args, bin_dir, warmup)
            run_cycles(setups, netns, args, bin_dir, cycles, server_cpu)
            mine, theirs = summary(ours.samples), summary(multus.samples)
            out["rails"][str(count)] = {
                **{s.label: {**summary(s.samples), **s.per_verb(), **_cpu_parts(s)} for s in setups},
                "ratio_median": mine["median"] / theirs["median"],
                "ratio_p95": mine["p95"] / theirs["p95"],
            }
            release(bed, ns)
    at1, at8 = out["rails"].get("1"), out["rails"].get("8")
    out["targets"] = {
        "8 rails <= 0.40 x Multus": None
        if at8 is None
        else at8["ratio_median"] <= TARGET_AT_8 and at8["ratio_p95"] <= TARGET_AT_8,
        "1 rail <= 1.00 x Multus": None if at1 is None else at1["ratio_median"] <= TARGET_AT_1,
    }
    return out


def _cpu_parts(setup: Setup) -> dict[str, float]:
    """Mean CPU ms per ADD+DEL: the shim processes, the daemon, its delegates, the API server and etcd."""
    return {
        **cpu_means(setup.cpu),
        "cpu_api_server": statistics.fmean(setup.server_cpu) if setup.server_cpu else 0.0,
    }


def report(result: dict[str, Any]) -> None:
    print(f"ADD+DEL of one Pod, {result['cycles']} cycles per rail count (ms)")
    print(
        f"{'rails':>5} {'cni-shim median':>16} {'p95':>8} {'Multus median':>14} {'p95':>8} {'x median':>9} {'x p95':>7}"
    )
    for count, row in result["rails"].items():
        a, b = row[OURS_LIVE], row[MULTUS_THICK]
        print(
            f"{count:>5} {a['median']:>16.1f} {a['p95']:>8.1f} {b['median']:>14.1f} {b['p95']:>8.1f}"
            f" {row['ratio_median']:>9.2f} {row['ratio_p95']:>7.2f}"
        )
    for count, row in result["rails"].items():
        if OURS_BEFORE in row:
            a, b = row[OURS_LIVE], row[OURS_BEFORE]
            print(
                f"  {count} rails, this checkout vs --before: median {a['median']:.1f} vs {b['median']:.1f},"
                f" ADD {a['ADD_median']:.1f} vs {b['ADD_median']:.1f}, DEL {a['DEL_median']:.1f} vs"
                f" {b['DEL_median']:.1f}, x{a['median'] / b['median']:.2f}"
            )
    for count, row in result["rails"].items():
        a, s, b = row[OURS_LIVE], row[OURS_SERIAL], row[MULTUS_THICK]
        print(
            f"  {count} rails, ADD / DEL medians: cni-shim {a['ADD_median']:.1f} / {a['DEL_median']:.1f},"
            f" serial {s['ADD_median']:.1f} / {s['DEL_median']:.1f},"
            f" Multus {b['ADD_median']:.1f} / {b['DEL_median']:.1f}"
        )
    print("  CPU ms per ADD+DEL (mean): shim processes + daemon + delegates (+ API server and etcd)")
    for count, row in result["rails"].items():
        for label in (OURS_LIVE, OURS_SERIAL, MULTUS_THICK, OURS_BEFORE):
            if label not in row:
                continue
            c = row[label]
            print(
                f"  {count} rails, {label}: {c['cpu_plugins']:.0f} + {c['cpu_daemon']:.0f}"
                f" + {c['cpu_delegates']:.0f} = {c['cpu']:.0f} (+ {c['cpu_api_server']:.0f})"
            )
    for what, met in result["targets"].items():
        print(f"target {what}: {'met' if met else 'missed' if met is False else 'not measured'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rails", description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rails", default=",".join(map(str, RAILS)))
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument(
        "--before", type=Path, help="a checkout whose .venv's cni-shim-daemon runs beside this one's"
    )
    opts = parser.parse_args(argv)
    rails = tuple(int(r) for r in opts.rails.split(","))

    def run(bed: TestBed, tools: ToolSet, work: Path) -> None:
        started = time.monotonic()
        before = opts.before / ".venv" / "bin" / "cni-shim-daemon" if opts.before else None
        result = measure(bed, tools, work, opts.cycles, opts.warmup, rails, before)
        result["seconds"] = round(time.monotonic() - started, 1)
        report(result)
        if opts.json:
            opts.json.write_text(json.dumps(result, indent=2))

    return standalone("bench-rails-", run)


if __name__ == "__main__":
    raise SystemExit(main())
