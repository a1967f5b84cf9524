"""containerd restarts in the middle of a CNI ADD and of a CNI DEL, on the real kubelet v1.36.3
(issue #35 item 7). The sriov test plugin's per-VF locks, held by the test, stop the call inside
its delegate; containerd is killed and started again (its shims and the call it had started run
on, as under systemd's KillMode=process); then the locks go. The kubelet retries against the
new containerd: the Pod runs with its interfaces, or its deletion completes, and afterwards no
sandbox, netns, veth, cache file, VF, whereabouts or host-local lease is left
(testbed.checks.teardown_checks), and every sandbox containerd still lists is stopped."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pytest

from testbed.checks import check_addresses, check_device_status, check_shadows, teardown_checks
from testbed.results import PASS, render_checks
from testbed.scenario import Running, applied, running_pairs, stop_pod
from testbed.stack import Stack
from testbed.waiting import wait_for
from testbed.workloads import pairs_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]

IN_FLIGHT_TIMEOUT = 90.0


def _stopped(stack: Stack, uid: str) -> bool:
    return all(s["state"] == "SANDBOX_NOTREADY" for s in stack.node_runtime.sandboxes(uid))


def _restart_during(stack: Stack, command: str, vfs: Sequence[str], begin: Callable[[], object]) -> float:
    """`begin` a Pod's creation or deletion with `vfs` locked; once its CNI `command` waits on a
    lock, containerd restarts; then the locks go. Returns when containerd was back (monotonic)."""
    with stack.cni.vf_locks(vfs):
        begin()
        wait_for(
            lambda: stack.cni.calls_in_flight(command),
            IN_FLIGHT_TIMEOUT,
            what=f"a {command} held on a VF lock",
        )
        stack.node_runtime.restart_containerd()
        return time.monotonic()


def _no_new_netns(stack: Stack, before: set[str]) -> None:
    """Not even the sandbox whose ADD containerd lost track of left its network namespace."""
    left = stack.node_runtime.netns_files() - before
    assert not left, left


def test_containerd_restarted_during_an_add_converges(thick_stack: Stack) -> None:
    stack = thick_stack
    node = stack.node_runtime
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    namespace, name = pairs.namespace, pairs.pod["metadata"]["name"]
    every_vf = [vf.pci for vf in stack.fake_node.vfs]
    netns_before = node.netns_files()
    with applied(stack, pairs) as sources:
        try:
            restarted = _restart_during(stack, "ADD", every_vf, lambda: stack.cluster.create_pod(pairs.pod))
            live = stack.cluster.wait_running(namespace, name)
            converged = time.monotonic() - restarted
            run = Running(stack, pairs, live, sources, 0, 0.0)
            uid = live["metadata"]["uid"]
            obs = run.observe()
            for verdict in (check_shadows(obs, 2), check_addresses(stack, obs), check_device_status(obs)):
                assert verdict.status == PASS, verdict
            ready = [s for s in node.sandboxes(uid) if s["state"] == "SANDBOX_READY"]
            assert len(ready) == 1, node.sandboxes(uid)
            assert node.netns_files() - netns_before, "the netns check below would look at nothing"
            print(f"containerd restart mid-ADD: Running {converged:.1f}s after the restart")
        finally:
            refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)
        assert _stopped(stack, uid), node.sandboxes(uid)
        _no_new_netns(stack, netns_before)


def test_containerd_restarted_during_a_del_converges(thick_stack: Stack) -> None:
    stack = thick_stack
    node = stack.node_runtime
    with running_pairs(stack) as run:
        uid = run.pod["metadata"]["uid"]
        stack.kubelet.netns_path(uid)  # the teardown checks look for this sandbox and its veth
        vfs = [row.vf_pci for row in run.observe().rows]
        netns_before = node.netns_files()
        assert netns_before, "the netns check below would look at nothing"
        restarted = _restart_during(
            stack,
            "DEL",
            vfs,
            lambda: stack.cluster.core.delete_namespaced_pod(
                run.pod["metadata"]["name"], run.pod["metadata"]["namespace"]
            ),
        )
        print(f"containerd restart mid-DEL: deleted {time.monotonic() - restarted:.1f}s after the restart")
    assert _stopped(stack, uid), node.sandboxes(uid)
    _no_new_netns(stack, netns_before)
