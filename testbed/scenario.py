"""The scenarios that compose a stack's components, as ``make demo`` and tests/e2e run them: apply
a workload, start its Pod, observe and check it (spec 14.4), delete it as a user would, check the
teardown, remove the workload. ``run_pairs`` is spec 14.2's, ``run_extended_resource`` the one-line
request's; ``running_pairs``, ``running`` and ``applied`` hand the lifecycle tests a running Pod or
the applied objects.

    with Stack(bed, thick=...) as stack:
        result = run_pairs(stack)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sriov_contract.errors import ReasonedError
from testbed.checks import (
    check_addresses,
    check_allocation,
    check_cni_mode,
    check_cni_reads,
    check_device_status,
    check_interfaces,
    check_no_user_selection,
    check_pcie_roots,
    check_rdma,
    check_shadow_content,
    check_shadows,
    check_sources_unchanged,
    rdma_vfs,
    teardown_checks,
)
from testbed.claims import RESOURCE_API
from testbed.cluster import CLEANUP_TIMEOUT
from testbed.observation import Observed, observe
from testbed.results import FAIL, PASS, Check, Result, render_checks
from testbed.waiting import wait_for
from testbed.workloads import Workload, extended_resource_workload, one_network_workload, pairs_workload

if TYPE_CHECKING:
    from testbed.stack import Stack


@dataclass
class Running:
    """A workload applied and its Pod started; ``stop`` deletes the Pod like a user would."""

    stack: Stack
    workload: Workload
    pod: dict[str, Any]
    sources: dict[str, tuple[str, str, str]]
    audit_mark: int
    started_s: float

    def observe(self) -> Observed:
        return observe(self.stack, self.pod)

    def kill_sandbox(self, what: str = "the kubelet to re-create the sandbox") -> None:
        """SIGKILL the Pod's ready sandbox (its pause process), then wait until the kubelet made
        another one and the Pod runs again."""
        node, uid = self.stack.node_runtime, str(self.pod["metadata"]["uid"])
        sandbox = node.ready_sandbox(uid)["id"]
        os.kill(node.sandbox_pid(sandbox), signal.SIGKILL)
        wait_for(
            lambda: any(s["state"] == "SANDBOX_READY" and s["id"] != sandbox for s in node.sandboxes(uid)),
            90,
            what=what,
            interval=0.25,
        )
        self.stack.cluster.wait_running(self.pod["metadata"]["namespace"], self.pod["metadata"]["name"])


def apply_workload(stack: Stack, workload: Workload) -> dict[str, tuple[str, str, str]]:
    stack.cluster.apply(workload.objects())
    stack.label_nodes(True)
    if any(doc["kind"] == "DeviceClass" and "gpu.nvidia.com" in json.dumps(doc) for doc in workload.workload):
        stack.gpus.publish()
    for node in stack.nodes:
        node.driver.wait_advertised(workload.advertised)
    return source_snapshot(stack, workload)


def remove_workload(stack: Stack, workload: Workload) -> None:
    stack.cluster.delete(workload.objects())
    stack.gpus.withdraw()
    stack.label_nodes(False)


def start_pod(
    stack: Stack, workload: Workload, pod: Mapping[str, Any], sources: dict[str, tuple[str, str, str]]
) -> Running:
    mark = stack.bed.audit.mark()
    started = time.monotonic()
    stack.cluster.create_pod(pod)
    live = stack.cluster.wait_running(pod["metadata"]["namespace"], pod["metadata"]["name"])
    return Running(stack, workload, live, sources, mark, round(time.monotonic() - started, 2))


def stop_pod(stack: Stack, pod: Mapping[str, Any]) -> list[str]:
    """Delete the Pod as a user would; wait until it and its generated claims are gone.

    Returns the Pod's whereabouts podref. Safe for a Pod that never started or never existed.
    """
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    stack.cluster.delete_pod(namespace, name)

    def claims_gone() -> bool:
        claims = stack.cluster.list_objects(*RESOURCE_API, "resourceclaims", namespace=namespace)
        owners = [o for c in claims for o in c["metadata"].get("ownerReferences") or []]
        return not any(o["kind"] == "Pod" and o["name"] == name for o in owners)

    wait_for(claims_gone, CLEANUP_TIMEOUT, what=f"claims of Pod {namespace}/{name} deleted", interval=0.25)
    return [f"{namespace}/{name}"]


def spec_checks(stack: Stack, run: Running, obs: Observed, *, gpus: int, vfs: int) -> list[Check]:
    source_names = [
        doc["metadata"]["name"] for doc in run.workload.admin if doc["kind"] == "NetworkAttachmentDefinition"
    ]
    checks = [
        check_cni_mode(stack, obs, run.audit_mark),
        check_allocation(obs, gpus, vfs),
        check_shadows(obs, vfs),
        check_shadow_content(stack, obs, run.workload),
        check_device_status(obs),
        check_interfaces(obs),
        check_addresses(stack, obs),
    ]
    if gpus:
        checks.append(check_pcie_roots(stack, obs))
    if rdma_vfs(stack, obs):
        checks.append(check_rdma(stack, obs, str(run.pod["spec"]["containers"][0]["name"])))
    checks += [
        check_no_user_selection(obs, run.workload, source_names),
        check_sources_unchanged(run.sources, source_snapshot(stack, run.workload)),
        check_cni_reads(stack, run.audit_mark),
    ]
    return checks


def new_result(stack: Stack, scenario: str, *, timings: dict[str, float] | None = None) -> Result:
    """An empty result of `scenario` on this stack (its CNI mode, kubelet and installation)."""
    return Result(
        scenario,
        "thick" if stack.thick else "thin",
        stack.kubelet_kind,
        install=stack.install,
        timings=timings or {},
    )


def run_workload(stack: Stack, workload: Workload, *, gpus: int, vfs: int) -> Result:
    """Apply, start the Pod, observe and check it, delete it, check the teardown, remove the objects."""
    result = new_result(stack, workload.name, timings=dict(stack.timings))
    sources = apply_workload(stack, workload)
    try:
        run = start_pod(stack, workload, workload.pod, sources)
        result.timings["pod_running_s"] = run.started_s
        obs = run.observe()
        result.rows = obs.rows
        result.checks = spec_checks(stack, run, obs, gpus=gpus, vfs=vfs)
        started = time.monotonic()
        refs = stop_pod(stack, workload.pod)
        result.timings["pod_deleted_s"] = round(time.monotonic() - started, 2)
        result.after_teardown = teardown_checks(stack, workload, refs)
    except ReasonedError as exc:
        result.checks.append(
            Check(f"Pod {workload.pod['metadata']['name']} runs", FAIL, f"{exc.reason}: {exc.message}")
        )
        with contextlib.suppress(ReasonedError):
            stop_pod(stack, workload.pod)
    finally:
        remove_workload(stack, workload)
    return result


def run_pairs(stack: Stack) -> Result:
    return run_workload(stack, pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam()), gpus=2, vfs=2)


def run_one_network(stack: Stack) -> Result:
    return run_workload(
        stack, one_network_workload(stack.fake_node, stack.cni.whereabouts_ipam()), gpus=0, vfs=1
    )


def run_extended_resource(stack: Stack) -> Result:
    """One-line requests: two VFs asked for in resources.limits, each on its rail's network."""
    return run_workload(
        stack, extended_resource_workload(stack.fake_node, stack.cni.whereabouts_ipam()), gpus=0, vfs=2
    )


@contextlib.contextmanager
def applied(stack: Stack, workload: Workload) -> Iterator[dict[str, tuple[str, str, str]]]:
    """The workload's objects for the duration of a block (tests start several Pods under it)."""
    sources = apply_workload(stack, workload)
    try:
        yield sources
    finally:
        remove_workload(stack, workload)


@contextlib.contextmanager
def running_pairs(stack: Stack) -> Iterator[Running]:
    """The pairs workload's Pod running for the duration of a block; after it the Pod is deleted as
    a user would, and anything the teardown checks find left behind fails the block."""
    with running(stack, pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())) as run:
        yield run


@contextlib.contextmanager
def running(stack: Stack, workload: Workload) -> Iterator[Running]:
    """`workload`'s Pod running for the duration of a block, deleted and checked after it."""
    with applied(stack, workload) as sources:
        run = start_pod(stack, workload, workload.pod, sources)
        try:
            yield run
        finally:
            refs = stop_pod(stack, workload.pod)
        after_teardown = teardown_checks(stack, workload, refs)
        if any(c.status != PASS for c in after_teardown):
            raise ReasonedError("TeardownIncomplete", render_checks(after_teardown))


def source_snapshot(stack: Stack, workload: Workload) -> dict[str, tuple[str, str, str]]:
    out = {}
    for doc in workload.admin:
        if doc["kind"] == "NetworkAttachmentDefinition":
            nad = stack.cluster.nad(doc["metadata"]["namespace"], doc["metadata"]["name"])
            out[nad["metadata"]["name"]] = (
                nad["metadata"]["uid"],
                nad["metadata"]["resourceVersion"],
                nad["spec"]["config"],
            )
    return out
