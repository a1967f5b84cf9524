"""A lost CNI cache on the real kubelet v1.36.3 (containerd + runc), issue #35 item 6: the node's
delegate cache directory is gone and the Pod is force-deleted, so the kubelet's CNI DEL finds
neither cache nor Pod. The Pod's protected shadows still give the DEL what it needs: every VF
comes home, whereabouts and the cluster network's host-local hold nothing, the checkpoint
empties and no sandbox, veth or cache file is left (testbed.checks.teardown_checks)."""

from __future__ import annotations

import shutil

import pytest

from testbed.checks import teardown_checks
from testbed.results import PASS, render_checks
from testbed.scenario import applied, start_pod, stop_pod
from testbed.stack import Stack
from testbed.workloads import pairs_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]


def test_a_force_deleted_pod_whose_cni_cache_was_lost_leaves_nothing(thick_stack: Stack) -> None:
    stack = thick_stack
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    with applied(stack, pairs) as sources:
        run = start_pod(stack, pairs, pairs.pod, sources)
        uid = run.pod["metadata"]["uid"]
        assert len(stack.cluster.shadows(pairs.namespace, uid)) == 2
        stack.kubelet.netns_path(uid)  # the teardown checks look for this sandbox and its veth
        shutil.rmtree(stack.cni.shim_cache)  # e.g. a cniDir on a tmpfs the node lost
        stack.cluster.core.delete_namespaced_pod(
            run.pod["metadata"]["name"], run.pod["metadata"]["namespace"], grace_period_seconds=0
        )
        refs = stop_pod(stack, pairs.pod)
        checks = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)
        assert all(s["state"] == "SANDBOX_NOTREADY" for s in stack.node_runtime.sandboxes(uid))
