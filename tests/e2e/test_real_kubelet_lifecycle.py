"""Pod lifecycle on the real kubelet v1.36.3 (containerd + runc): what the spec's K1-K13 assume
about the kubelet, observed instead of simulated (testbed/realnode.py, testbed/stack.py).

NodePrepare/NodeUnprepareResources calls are counted from the kubelet's own log (-v=4); CNI calls
from cni-shim-daemon's log; sandboxes and containers through the CRI (crictl).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from sriov_contract import keys
from testbed.checks import check_addresses, check_device_status, check_shadows, teardown_checks
from testbed.cluster import CLEANUP_TIMEOUT
from testbed.netlinks import ipv4_addresses, ns_links
from testbed.observation import Observed
from testbed.results import PASS, render_checks
from testbed.scenario import (
    Running,
    applied,
    apply_workload,
    remove_workload,
    running_pairs,
    start_pod,
    stop_pod,
)
from testbed.stack import Stack
from testbed.waiting import wait_for
from testbed.workloads import Workload, network_names, pairs_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]


def _shadow_ids(obs: Observed) -> set[tuple[str, str, str]]:
    return {(s["metadata"]["name"], s["metadata"]["uid"], s["spec"]["config"]) for s in obs.shadows}


def _selections(obs: Observed) -> tuple[str, str]:
    annotations = obs.pod["metadata"]["annotations"]
    return annotations[keys.NETWORKS_ANNOTATION], annotations[keys.REGISTRY_ANNOTATION]


def _same_network(before: Observed, after: Observed) -> None:
    assert _shadow_ids(after) == _shadow_ids(before) and len(before.shadows) == 2
    assert _selections(after) == _selections(before)
    assert [(r.request, r.vf_pci, r.shadow_nad, r.interface, r.ip) for r in after.rows] == [
        (r.request, r.vf_pci, r.shadow_nad, r.interface, r.ip) for r in before.rows
    ]


def _pod_key(run: Running) -> str:
    meta = run.pod["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def _restarts(stack: Stack, run: Running) -> int:
    pod = stack.cluster.read_pod(run.pod["metadata"]["namespace"], run.pod["metadata"]["name"]) or {}
    return sum(
        int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or []
    )


def test_container_restart_reuses_the_sandbox_without_prepare_or_cni(thick_stack: Stack) -> None:
    stack = thick_stack
    node = stack.node_runtime
    with running_pairs(stack) as run:
        before = run.observe()
        sandbox = node.ready_sandbox(before.uid)["id"]
        prepares, adds = stack.kubelet.prepare_calls(), stack.cni.daemon_answers("ADD", _pod_key(run))
        (container,) = [c for c in node.containers(before.uid) if c["state"] == "CONTAINER_RUNNING"]
        # The workload's PID 1 ignores SIGTERM; crictl stop kills it after the timeout, the kubelet
        # restarts it (restartPolicy Always) in the same sandbox.
        node.crictl("stop", "--timeout", "0", container["id"])
        wait_for(lambda: _restarts(stack, run) >= 1, 60, what="the kubelet to restart the container")
        stack.cluster.wait_running(run.pod["metadata"]["namespace"], run.pod["metadata"]["name"])
        after = run.observe()
        assert node.ready_sandbox(before.uid)["id"] == sandbox
        _same_network(before, after)
        assert stack.kubelet.prepare_calls() == prepares
        assert stack.cni.daemon_answers("ADD", _pod_key(run)) == adds


def test_recreated_sandbox_keeps_shadows_and_addresses_without_a_new_prepare(thick_stack: Stack) -> None:
    """Spec K3: a dead sandbox is re-created (CNI DEL of the old, ADD of the new) from the kubelet's
    prepared-claim cache, with no NodePrepareResources; the frozen shadows are reused."""
    stack = thick_stack
    node = stack.node_runtime
    with running_pairs(stack) as run:
        before = run.observe()
        old = node.ready_sandbox(before.uid)["id"]
        old_netns = stack.kubelet.netns_path(before.uid)
        prepares, adds = stack.kubelet.prepare_calls(), stack.cni.daemon_answers("ADD", _pod_key(run))
        dels = stack.cni.daemon_answers("DEL", _pod_key(run))
        os.kill(node.sandbox_pid(old), signal.SIGKILL)  # the pause process: the sandbox dies

        def recreated() -> bool:
            ready = [s for s in node.sandboxes(before.uid) if s.get("state") == "SANDBOX_READY"]
            return bool(ready) and ready[0]["id"] != old

        wait_for(recreated, 90, what="the kubelet to re-create the Pod's sandbox", interval=0.25)
        stack.cluster.wait_running(run.pod["metadata"]["namespace"], run.pod["metadata"]["name"])
        after = run.observe()
        new = node.ready_sandbox(before.uid)["id"]
        assert stack.kubelet.netns_path(before.uid) != old_netns
        assert not os.path.exists(old_netns), "containerd removed the dead sandbox's netns"
        # the shim cached the new attachment under the new sandbox ID, the old one is gone
        cached = {p.name for p in (stack.run / "shim-cache").iterdir()}
        assert any(new in name for name in cached) and not any(old in name for name in cached), cached
        _same_network(before, after)
        assert check_addresses(stack, after).status == PASS, check_addresses(stack, after)
        assert stack.kubelet.prepare_calls() == prepares
        assert stack.cni.daemon_answers("ADD", _pod_key(run)) == adds + 1
        assert stack.cni.daemon_answers("DEL", _pod_key(run)) == dels + 1
        assert set(stack.driver.checkpoint_claims()) == {before.claim["metadata"]["uid"]}


def test_kubelet_restart_keeps_the_running_pod_and_its_bindings(thick_stack: Stack) -> None:
    """Spec K7: a kubelet restart with a running Pod leaves its sandbox, shadows and addresses;
    the bindings stay Ready, no second shadow appears and the driver's slices come back (the
    kubelet deletes its node's ResourceSlices when it starts). The restarted kubelet has lost its
    prepared state: the next sandbox it creates for the Pod calls NodePrepareResources again, and
    the driver answers from its checkpoint with the same shadows."""
    stack = thick_stack
    node = stack.node_runtime
    with running_pairs(stack) as run:
        before = run.observe()
        sandbox = node.ready_sandbox(before.uid)["id"]
        adds = stack.cni.daemon_answers("ADD", _pod_key(run))
        prepares = stack.kubelet.prepare_calls()
        node.restart_kubelet()
        stack.driver.wait_advertised(run.workload.advertised)
        stack.gpus.publish()  # nobody republishes the stand-in GPU slices the kubelet deleted
        after = run.observe()
        assert node.ready_sandbox(before.uid)["id"] == sandbox
        _same_network(before, after)
        assert check_device_status(after).status == PASS, check_device_status(after)
        assert len(stack.cluster.shadows(run.workload.namespace)) == 2
        assert stack.cni.daemon_answers("ADD", _pod_key(run)) == adds
        assert stack.kubelet.prepare_calls() == prepares, "the restart alone re-prepared the running Pod"

        run.kill_sandbox("the restarted kubelet to re-create the sandbox")
        again = run.observe()
        assert stack.kubelet.prepare_calls() == prepares + 1
        _same_network(before, again)
        assert check_device_status(again).status == PASS, check_device_status(again)
        assert len(stack.cluster.shadows(run.workload.namespace)) == 2


def test_pod_deletion_runs_cni_del_before_unprepare_and_frees_everything(thick_stack: Stack) -> None:
    """Spec K6/K13: StopPodSandbox (CNI DEL) comes before NodeUnprepareResources; afterwards no
    shadow, no whereabouts lease, every VF on the host and an empty checkpoint."""
    stack = thick_stack
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    with applied(stack, pairs) as sources:
        run = start_pod(stack, pairs, pairs.pod, sources)
        key = _pod_key(run)
        unprepares = stack.node_runtime.rpc_calls("NodeUnprepareResources")
        stack.cluster.core.delete_namespaced_pod(
            run.pod["metadata"]["name"], run.pod["metadata"]["namespace"]
        )
        seen: dict[str, Any] = {}

        def unprepared() -> bool:
            if stack.node_runtime.rpc_calls("NodeUnprepareResources") > unprepares:
                # read right after the kubelet logged the unprepare: a DEL after it is not logged yet
                seen["dels"] = stack.cni.daemon_answers("DEL", key)
                return True
            return False

        wait_for(unprepared, CLEANUP_TIMEOUT, what="the kubelet's NodeUnprepareResources", interval=0.02)
        assert seen["dels"] >= 1, "NodeUnprepareResources completed before any CNI DEL of the Pod"
        refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)
        assert not stack.node_runtime.sandboxes(run.pod["metadata"]["uid"]) or all(
            s["state"] == "SANDBOX_NOTREADY" for s in stack.node_runtime.sandboxes(run.pod["metadata"]["uid"])
        )


def test_force_deleted_pod_is_torn_down_without_freeing_anything_unsafely(thick_stack: Stack) -> None:
    """A Pod deleted with grace period 0: the API object is gone at once, while the kubelet still
    holds the sandbox. Nothing may be freed while the Pod's netns still holds a VF. With the
    driver held (SIGSTOP) the kubelet's unprepare waits: the orphan scan then reports the Pod's two
    protected shadows as accounted for by the checkpoint (no orphan, nothing finalized); in the
    end everything is released."""
    stack = thick_stack
    node = stack.node_runtime
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    with applied(stack, pairs) as sources:
        run = start_pod(stack, pairs, pairs.pod, sources)
        uid = run.pod["metadata"]["uid"]
        claim = run.observe().claim["metadata"]["uid"]
        shadows = {s["metadata"]["name"] for s in stack.cluster.shadows(pairs.namespace, uid)}
        netns = stack.kubelet.netns_path(uid)
        vfs = [row.vf_pci for row in run.observe().rows]
        assert stack.host_driver.process is not None
        with stack.host_driver.process.paused():
            stack.cluster.core.delete_namespaced_pod(
                run.pod["metadata"]["name"], run.pod["metadata"]["namespace"], grace_period_seconds=0
            )
            # While an address is still configured on a VF in the Pod's netns, its whereabouts lease
            # must still be held: freeing it then could hand the same IP to another Pod.
            networks = network_names(pairs)
            deadline = time.monotonic() + CLEANUP_TIMEOUT
            while os.path.exists(netns) and time.monotonic() < deadline:
                # Like sriov-cni, the plugin's DEL releases the lease before it moves the VF out:
                # under its locks that DEL is either not begun or done.
                with stack.cni.vf_locks(vfs):
                    try:
                        links = ns_links(netns)
                    except subprocess.CalledProcessError:
                        break  # the netns went away between the check and the read
                    held = [a for name in ("dra0", "dra1") for a in ipv4_addresses(links.get(name, {}))]
                    freed = bool(held) and not stack.cluster.whereabouts_allocations(networks)
                assert not freed, f"whereabouts freed the leases while {held} are still in the Pod netns"
                time.sleep(0.05)  # a poll interval, bounded by the deadline above
            assert not os.path.exists(netns), "the kubelet never tore the force-deleted Pod's sandbox down"
            scan = stack.driver.orphan_scan()
            reported = {s["name"]: s for s in scan["shadows"]}
            assert scan["orphans"] == [] and set(reported) == shadows, scan
            assert all(s["protected"] and s["status"] != "Orphan" for s in reported.values()), scan
            assert set(stack.driver.checkpoint_claims()) == {claim}, "the checkpoint let go before unprepare"
        refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)
        assert all(s["state"] == "SANDBOX_NOTREADY" for s in node.sandboxes(uid))


@pytest.mark.parametrize("step", ["prepare-created", "prepare-pod"])
def test_driver_killed_during_prepare_converges_on_the_kubelets_retry(thick_stack: Stack, step: str) -> None:
    """The driver dies inside NodePrepareResources (a crash point: no cleanup, like SIGKILL); the
    kubelet's call fails and it retries against the restarted, re-registered driver. The Pod
    runs with exactly its two shadows; deletion leaves nothing."""
    stack = thick_stack
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    namespace, name = pairs.namespace, pairs.pod["metadata"]["name"]
    with applied(stack, pairs) as sources:
        stack.driver.restart({"SRIOV_DRA_CRASH_AT": step})
        try:
            stack.cluster.create_pod(pairs.pod)
            assert stack.host_driver.process is not None
            driver = stack.host_driver.process
            wait_for(lambda: not driver.alive(), 60, what=f"the driver to crash at {step}")
            stack.driver.restart()
            run = Running(stack, pairs, stack.cluster.wait_running(namespace, name), sources, 0, 0.0)
            obs = run.observe()
            assert check_shadows(obs, 2).status == PASS, check_shadows(obs, 2)
            assert check_addresses(stack, obs).status == PASS, check_addresses(stack, obs)
            assert check_device_status(obs).status == PASS, check_device_status(obs)
            assert len(stack.cluster.shadows(namespace)) == 2
        finally:
            if stack.host_driver.process is None or not stack.host_driver.process.alive():
                stack.driver.restart()
            refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)


@pytest.mark.parametrize("step", ["unprepare-shadow-deleted", "unprepare-hardware"])
def test_driver_killed_during_unprepare_converges_on_the_kubelets_retry(
    thick_stack: Stack, step: str
) -> None:
    """The driver dies inside NodeUnprepareResources of a deleted Pod; the kubelet retries the
    unprepare against the restarted driver and the cleanup completes."""
    stack = thick_stack
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    with applied(stack, pairs) as sources:
        start_pod(stack, pairs, pairs.pod, sources)
        stack.driver.restart({"SRIOV_DRA_CRASH_AT": step})
        try:
            stack.cluster.core.delete_namespaced_pod(pairs.pod["metadata"]["name"], pairs.namespace)
            assert stack.host_driver.process is not None
            driver = stack.host_driver.process
            wait_for(lambda: not driver.alive(), 60, what=f"the driver to crash at {step}")
        finally:
            stack.driver.restart()
        refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)


def test_namespace_deletion_with_a_running_managed_pod_completes_cleanup(thick_stack: Stack) -> None:
    """Spec 17.4: deleting the workload namespace with a running managed Pod: the kubelet tears the
    Pod down, the protected shadows' finalizers stay patchable in the terminating namespace, no new
    shadow appears, and the namespace goes away with nothing left (runs last: it removes the
    example's namespace, which the stack re-creates)."""
    stack = thick_stack
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    sources = apply_workload(stack, pairs)
    try:
        run = start_pod(stack, pairs, pairs.pod, sources)
        shadows = {s["metadata"]["uid"] for s in run.observe().shadows}
        assert len(shadows) == 2
        stack.cluster.core.delete_namespace(pairs.namespace)
        seen: set[str] = set()

        def gone() -> bool:
            with contextlib.suppress(ApiException):
                seen.update(s["metadata"]["uid"] for s in stack.cluster.shadows(pairs.namespace))
            try:
                stack.cluster.core.read_namespace(pairs.namespace)
            except ApiException as exc:
                return bool(exc.status == 404)
            return False

        wait_for(gone, 120, what=f"namespace {pairs.namespace} deleted", interval=0.25)
        assert seen <= shadows, f"new shadows appeared during namespace deletion: {seen - shadows}"
        checks = teardown_checks(stack, pairs, [f"{pairs.namespace}/{pairs.pod['metadata']['name']}"])
        assert all(c.status == PASS for c in checks), render_checks(checks)
    finally:
        remove_workload(stack, pairs)
        stack.bed.create_namespace(pairs.namespace, exist_ok=True)


def _converged_with_exactly_two_shadows(stack: Stack, pairs: Workload) -> Observed:
    run = Running(
        stack, pairs, stack.cluster.wait_running(pairs.namespace, pairs.pod["metadata"]["name"]), {}, 0, 0
    )
    obs = run.observe()
    for result in (check_shadows(obs, 2), check_addresses(stack, obs), check_device_status(obs)):
        assert result.status == PASS, result
    assert len(stack.cluster.shadows(pairs.namespace)) == 2
    return obs


def test_cni_daemon_killed_during_a_pods_add_converges_on_the_kubelets_retry(thick_stack: Stack) -> None:
    """cni-shim-daemon dies while the Pod's CNI ADD waits on it (held there by SIGSTOP, then
    SIGKILL): the sandbox fails, the kubelet makes another one from its prepared-claim cache (no
    second NodePrepareResources) against the restarted daemon; exactly two shadows, and deleting
    the Pod leaves nothing."""
    stack = thick_stack
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    with applied(stack, pairs):
        prepares = stack.kubelet.prepare_calls()
        assert stack.cni.daemon is not None
        try:
            with stack.cni.daemon.paused():
                stack.cluster.create_pod(pairs.pod)
                wait_for(
                    lambda: stack.cni.calls_in_flight("ADD"), 90, what="the Pod's ADD waiting on the daemon"
                )
                stack.kill("daemon")
            _converged_with_exactly_two_shadows(stack, pairs)
            assert stack.kubelet.prepare_calls() == prepares + 1
        finally:
            refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)


def test_kubelet_killed_during_prepare_converges_after_its_restart(thick_stack: Stack) -> None:
    """The kubelet dies inside NodePrepareResources (the driver held in the call by SIGSTOP): the
    driver finishes the prepare for a kubelet that is gone; the restarted kubelet prepares again
    and gets the same answer from the checkpoint, so the Pod runs with exactly two shadows."""
    stack = thick_stack
    node = stack.node_runtime
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    with applied(stack, pairs):
        started = node.rpc_calls("NodePrepareResources", started=True)
        prepares = stack.kubelet.prepare_calls()
        assert stack.host_driver.process is not None
        try:
            with stack.host_driver.process.paused():
                stack.cluster.create_pod(pairs.pod)
                wait_for(
                    lambda: node.rpc_calls("NodePrepareResources", started=True) > started,
                    90,
                    what="the kubelet inside NodePrepareResources",
                )
                node.stop_kubelet(kill=True)
            node.start_kubelet()
            stack.gpus.publish()  # the kubelet's start deleted the stand-in GPU slices
            obs = _converged_with_exactly_two_shadows(stack, pairs)
            assert stack.kubelet.prepare_calls() > prepares, "the restarted kubelet never prepared the claim"
            assert set(stack.driver.checkpoint_claims()) == {obs.claim["metadata"]["uid"]}
        finally:
            if not node.kubelet_alive():
                node.start_kubelet()
            refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)


@pytest.mark.parametrize("grace", [None, 0], ids=["deleted", "force-deleted"])
def test_pods_deleted_while_the_driver_is_down_are_released_when_it_returns(
    thick_stack: Stack, grace: int | None
) -> None:
    """Issue 35 item 3, dranet's case: the driver stops, and its Pod is deleted meanwhile. The
    kubelet tears the sandbox down (CNI DEL) but cannot unprepare, so the shadows stay protected
    and the checkpoint keeps the claim; once the driver is back and registered, the release
    completes and nothing is left on the node. Force-deleted (NVIDIA's suite's case), the Pod is
    gone from the API at once and its claim's reservation with it; the kubelet still owes the
    unprepare."""
    stack = thick_stack
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    with applied(stack, pairs) as sources:
        run = start_pod(stack, pairs, pairs.pod, sources)
        run.observe()  # records the sandbox and its veths for the teardown checks
        key = _pod_key(run)
        driver = stack.host_driver
        driver.stop()
        try:
            stack.cluster.core.delete_namespaced_pod(
                pairs.pod["metadata"]["name"], pairs.namespace, grace_period_seconds=grace
            )
            wait_for(
                lambda: stack.cni.daemon_answers("DEL", key) >= 1,
                CLEANUP_TIMEOUT,
                what="the kubelet's CNI DEL of the deleted Pod",
            )
            held = stack.cluster.shadows(pairs.namespace)
            assert len(held) == 2, held
            assert all(keys.PROTECTION_FINALIZER in (s["metadata"].get("finalizers") or []) for s in held)
            assert stack.driver.checkpoint_claims(), "the stopped driver's checkpoint lost the claim"
        finally:
            before = driver.registrations()
            driver.start()
            driver.wait_registered(before)
        refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)
