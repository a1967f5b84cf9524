"""One-line requests on the real kubelet v1.36.3 (DRAExtendedResource; spec 19.2 item 7): a Pod
whose only request is `resources.limits: {networking.example.com/rail-vfs: 2}` against a
DeviceClass with that extendedResourceName (docs/examples/extended-resource-vfs.yaml). The
scheduler makes the claim and names it in the Pod's status.extendedResourceClaimStatus; the
driver reaches the Pod through it, each VF gets its rail's network, and the kubelet's lifecycle
(container restart, kubelet restart, a re-created sandbox, deletion) treats it like any claim.
"""

from __future__ import annotations

import pytest

from testbed.checks import check_addresses, check_device_status
from testbed.claims import RESOURCE_API
from testbed.observation import Observed
from testbed.operator_rails import run_operator_one_line
from testbed.results import PASS, Result, render_checks, render_table
from testbed.scenario import Running, run_extended_resource, running
from testbed.stack import Stack
from testbed.waiting import wait_for
from testbed.workloads import extended_resource_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]

EXTENDED_RESOURCE = "networking.example.com/rail-vfs"


def _network(obs: Observed) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """Each VF's rail, source and interface, and the Pod's addresses. Which of two interfaces on one
    rail gets which address is the order of their parallel whereabouts ADDs, so a re-created
    sandbox may swap them; the set stays."""
    return (
        sorted((r.vf_pci, r.rail, r.source_nad, r.interface) for r in obs.rows),
        sorted(r.ip for r in obs.rows),
    )


def _shadows(obs: Observed) -> set[tuple[str, str]]:
    return {(s["metadata"]["name"], s["metadata"]["uid"]) for s in obs.shadows}


def _restarts(stack: Stack, run: Running) -> int:
    pod = stack.cluster.read_pod(run.pod["metadata"]["namespace"], run.pod["metadata"]["name"]) or {}
    return sum(
        int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or []
    )


def _assert_two_rail_vfs(stack: Stack, result: Result, checks: int) -> None:
    statuses = [c.status for c in [*result.checks, *result.after_teardown]]
    detail = render_table(result.rows) + "\n" + render_checks([*result.checks, *result.after_teardown])
    assert result.ok and statuses == [PASS] * checks, detail + "\n" + stack.logs()
    assert sorted(r.interface for r in result.rows) == ["dra0", "dra1"], detail
    for row in result.rows:
        assert row.source_nad == f"ai-workloads/{row.rail}-net", detail
        assert row.ip != "-", detail


def test_a_one_line_request_gets_two_vfs_each_on_its_rails_network(thick_stack: Stack) -> None:
    _assert_two_rail_vfs(thick_stack, run_extended_resource(thick_stack), checks=18)


def test_the_operators_extended_resource_class_serves_a_one_line_request(thick_stack: Stack) -> None:
    """The issue's case: `openshift.io/sriov_vfs: 2` against the class sriov-operator generates for
    resourceName sriov_vfs, with the rails' networks rendered from SriovNetworks (spec 14.3)."""
    # 18 checks of a VF-only run, plus the operator's policies Ready
    _assert_two_rail_vfs(thick_stack, run_operator_one_line(thick_stack), checks=19)


def test_the_extended_resource_pod_survives_restarts_and_leaves_nothing(thick_stack: Stack) -> None:
    """Container restart: same sandbox, no prepare, no CNI. Kubelet restart: the running Pod keeps
    its sandbox and bindings; the next sandbox the restarted kubelet makes calls NodePrepare again
    (reaching the claim through the Pod's status) and gets the same shadows. Deletion: the
    scheduler's claim goes with the Pod, and `running` fails unless nothing is left."""
    stack = thick_stack
    node = stack.node_runtime
    workload = extended_resource_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    with running(stack, workload) as run:
        before = run.observe()
        claim = before.claim["metadata"]
        assert claim["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
        assert not (before.pod["spec"].get("resourceClaims") or [])
        mapping = before.pod["status"]["extendedResourceClaimStatus"]
        assert mapping["resourceClaimName"] == claim["name"]
        assert [m["resourceName"] for m in mapping["requestMappings"]] == [EXTENDED_RESOURCE]
        assert len(before.shadows) == 2 and sorted(r.interface for r in before.rows) == ["dra0", "dra1"]
        assert check_addresses(stack, before).status == PASS, check_addresses(stack, before)
        assert check_device_status(before).status == PASS, check_device_status(before)

        sandbox = node.ready_sandbox(before.uid)["id"]
        prepares = stack.kubelet.prepare_calls()
        (container,) = [c for c in node.containers(before.uid) if c["state"] == "CONTAINER_RUNNING"]
        node.crictl("stop", "--timeout", "0", container["id"])
        wait_for(lambda: _restarts(stack, run) >= 1, 60, what="the kubelet to restart the container")
        stack.cluster.wait_running(workload.namespace, workload.pod["metadata"]["name"])
        restarted = run.observe()
        assert node.ready_sandbox(before.uid)["id"] == sandbox
        assert _network(restarted) == _network(before) and _shadows(restarted) == _shadows(before)
        assert stack.kubelet.prepare_calls() == prepares

        node.restart_kubelet()
        stack.driver.wait_advertised(workload.advertised)
        after = run.observe()
        assert node.ready_sandbox(before.uid)["id"] == sandbox
        assert _network(after) == _network(before) and _shadows(after) == _shadows(before)
        assert stack.kubelet.prepare_calls() == prepares, "the restart alone re-prepared the running Pod"

        run.kill_sandbox("the restarted kubelet to re-create the sandbox")
        again = run.observe()
        assert stack.kubelet.prepare_calls() == prepares + 1
        assert _network(again) == _network(before) and _shadows(again) == _shadows(before)
        assert check_device_status(again).status == PASS, check_device_status(again)
        assert set(stack.driver.checkpoint_claims()) == {claim["uid"]}
    claims = stack.cluster.list_objects(*RESOURCE_API, "resourceclaims", namespace=workload.namespace)
    assert [c["metadata"]["name"] for c in claims] == []
