"""Issue 36's AI node: eight GPUs and eight NICs under eight PCIe roots on eight rails
(fixtures/topologies/eight-pair.yaml, simulated hardware as everywhere on the bed), and one Pod
asking for eight GPU/NIC pairs through the real scheduler and the real kubelet. Every pair lands
under one root, every VF on its own rail with its own address, and the Pod's deletion leaves
nothing. The managed shadows' delegates run at once (cni_shim.core.delegatewaves)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.fakenode import load_topology_file
from testbed.results import PASS, render_checks, render_table
from testbed.scenario import run_workload
from testbed.stack import Stack, Stacks
from testbed.workloads import eight_pairs_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]

EIGHT_PAIR = Path(__file__).resolve().parents[2] / "fixtures" / "topologies" / "eight-pair.yaml"


@pytest.fixture
def eight_pair_stack(stacks: Stacks, real_kubelet: None) -> Stack:
    return stacks.get(thick=True, topology=load_topology_file(EIGHT_PAIR))


def test_one_pod_with_eight_gpu_nic_pairs(eight_pair_stack: Stack) -> None:
    stack = eight_pair_stack
    result = run_workload(
        stack, eight_pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam()), gpus=8, vfs=8
    )
    checks = [*result.checks, *result.after_teardown]
    explain = render_table(result.rows) + "\n" + render_checks(checks) + "\n" + stack.logs()
    assert result.ok and all(c.status == PASS for c in checks), explain
    rows = result.rows
    assert sorted(r.request for r in rows) == [f"nic-{i}" for i in range(8)], explain
    assert sorted(r.interface for r in rows) == [f"dra{i}" for i in range(8)], explain
    assert len({r.rail for r in rows}) == 8 and len({r.pcie_root for r in rows}) == 8, explain
    assert len({r.gpu for r in rows}) == 8 and len({r.ip for r in rows}) == 8, explain
