"""`make demo`: the two GPU/NIC pairs example of spec 14.2, then the same workload through the
operator-managed path of spec 14.3, end to end on one node.

Starts the test bed (etcd, kube-apiserver, controller-manager, scheduler), the fake SR-IOV node,
the node CNI (cni-shim, thick with cni-shim-daemon unless --cni-mode thin), the real kubelet with
containerd and runc, and the product: by default our images and deploy/base/, the kubelet running
the driver (auto-attach on) and the CNI DaemonSets (testbed/installation.py); with --install
processes, or where that cannot run (it says why in one line), sriov-dra-driver and
cni-shim-daemon as host processes; with --install helm, from the chart as a Helm release. The driver registers through the kubelet's plugin registry;
applies the spec's manifests; prints one row per interface and the spec 14.4 checks;
deletes the Pod and checks the cleanup. Then, on the same stack, the 14.3 scenario
(testbed/operator_rails.py): only the spec's SriovNetwork and SriovNetworkNodePolicy objects are
written, sriov-operator and its node-state reporter generate the driver's mapping, and the same
Pod runs with the 14.4 checks plus the operator's; it has its own PASS line. Last, the one-line
request (docs/examples/extended-resource-vfs.yaml): a Pod whose only request is
`resources.limits` of a DeviceClass's extended resource gets two VFs, each on its rail's
network, with the same checks. Tears everything down. Exits 1 if any check of any scenario FAILs (the one
SKIP is the thick-mode check of a thin run). Only where the real kubelet cannot run does it say why
in one line and use the simulated kubelet (testbed/kubelet_sim.py) instead.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

import click  # noqa: E402 - after the sys.path entry for the repo

from sriov_contract.errors import ReasonedError  # noqa: E402
from testbed import controlplane, operator_rails, realnode  # noqa: E402
from testbed.checks import stack_down_check  # noqa: E402
from testbed.fakenode import load_two_rail_rdma  # noqa: E402
from testbed.installation import DAEMONSETS, HELM_CHART, PROCESSES, install_unavailable  # noqa: E402
from testbed.kubelets import REAL, SIM  # noqa: E402
from testbed.results import Result, render_checks, render_table  # noqa: E402
from testbed.scenario import run_extended_resource, run_pairs  # noqa: E402
from testbed.stack import Stack  # noqa: E402
from testbed.tools import ToolSet  # noqa: E402


def say(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


@click.command()
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--cni-mode",
    type=click.Choice(["thick", "thin"]),
    default="thick",
    show_default=True,
    help="thick: cni-shim hands each call to cni-shim-daemon; thin: cni-shim does the work itself",
)
@click.option(
    "--kubelet",
    type=click.Choice(["auto", REAL, SIM]),
    default="auto",
    show_default=True,
    help="auto: the real kubelet, or the simulated one (saying why) where the real one cannot run",
)
@click.option(
    "--install",
    type=click.Choice([DAEMONSETS, HELM_CHART, PROCESSES]),
    default=DAEMONSETS,
    show_default=True,
    help="daemonsets: the product's images and deploy/base/ run by the real kubelet; helm: the same "
    "images from the chart as a Helm release; processes: the driver and the CNI daemon as host "
    "processes (the fast inner loop)",
)
def main(output: str, cni_mode: str, kubelet: str, install: str) -> None:
    """Run the spec 14.2 example end to end and print what happened."""
    tools = ToolSet()
    if kubelet == "auto":
        reason = realnode.unavailable_reason(tools)
        kubelet = SIM if reason else REAL
        if reason:
            say(f"demo: the real kubelet cannot run here ({reason}); using the simulated kubelet")
    if install != PROCESSES:
        reason = install_unavailable(tools, real_kubelet=kubelet == REAL, thick=cni_mode == "thick")
        if reason:
            install = PROCESSES
            say(f"demo: running the driver and the CNI daemon as host processes: {reason}")
    which = "the real kubelet v1.36.3" if kubelet == REAL else "the simulated kubelet"
    how = {
        DAEMONSETS: "as DaemonSets from deploy/base/",
        HELM_CHART: "as DaemonSets from the Helm chart",
        PROCESSES: "as host processes",
    }[install]
    say(f"== auto-sriov demo: two GPU/NIC pairs on one node, {which}, the product {how} (spec 14.2) ==")
    say("Starting etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback...")
    started = time.monotonic()
    try:
        bed = controlplane.start(tools=tools, run_id=controlplane.new_run_id("demo"))
    except ReasonedError as exc:
        say(f"demo: the test bed could not start: {exc.reason}: {exc.message}")
        sys.exit(1)
    try:
        say(f"Test bed up in {time.monotonic() - started:.1f}s (API server {bed.server})")
        with Stack(
            bed,
            thick=cni_mode == "thick",
            kubelet=kubelet,
            say=say,
            install=install,
            topology=load_two_rail_rdma(),
        ) as stack:
            say("Applying the spec 14.2 manifests and creating Pod ai-workloads/gpu-sriov-pairs-demo...")
            result = run_pairs(stack)
            say("== spec 14.3: the same two rails through SriovNetworkNodePolicy and SriovNetwork ==")
            rails = operator_rails.run_operator_rails(stack)
            say(
                "== one-line request: resources.limits {networking.example.com/rail-vfs: 2}, no claim named =="
            )
            one_line = run_extended_resource(stack)
            if not (result.ok and rails.ok and one_line.ok):
                say(stack.logs())
        result.after_stop = [stack_down_check(stack)]
    except ReasonedError as exc:
        say(f"demo: {exc.reason}: {exc.message}")
        sys.exit(1)
    except Exception as exc:  # one line for the user; the logs above say more
        say(f"demo: unexpected {type(exc).__name__}: {str(exc)[:2000]}")
        sys.exit(1)
    finally:
        bed.stop()
    result.timings["total_s"] = round(time.monotonic() - started, 2)
    ok = result.ok and rails.ok and one_line.ok
    if output == "json":
        print(
            json.dumps(
                {**result.to_json(), "operator_rails": rails.to_json(), "one_line": one_line.to_json()},
                indent=2,
            )
        )
    else:
        print(report(result, "spec 14.4"))
        print(report(rails, "spec 14.3 through sriov-operator, and 14.4"))
        print(report(one_line, "14.4 for a one-line extended-resource request", pod="sriov-vfs-demo"))
        print("\nRESULT: " + ("PASS" if ok else "FAIL"))
    sys.exit(0 if ok else 1)


def report(result: Result, spec: str, pod: str = "gpu-sriov-pairs-demo") -> str:
    lines = [
        f"\n[{result.scenario}] Interfaces of Pod ai-workloads/{pod} (CNI {result.cni_mode} mode, "
        f"{result.kubelet} kubelet):\n",
        render_table(result.rows) if result.rows else "  (no interfaces: see the checks)",
        f"\nChecks ({spec}):",
        render_checks(result.checks),
    ]
    if result.after_teardown:
        lines += ["\nAfter the Pod was deleted:", render_checks(result.after_teardown)]
    if result.after_stop:
        lines += ["\nAfter the stack was stopped:", render_checks(result.after_stop)]
    timings = ", ".join(f"{k} {v}" for k, v in result.timings.items())
    lines += [
        f"\nTimings (s): {timings}",
        f"\nRESULT ({result.scenario}): " + ("PASS" if result.ok else "FAIL"),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
