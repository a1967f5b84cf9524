"""Spec 14.3 end to end (testbed/operator_rails.py): the administrator writes only the spec's
SriovNetwork and SriovNetworkNodePolicy objects; sriov-operator and its node-state reporter
generate the driver's mapping; the 14.2 workload's two VFs each get an address from its own rail.
On the real kubelet where it can run (the same stack as test_gpu_nic_pairs.py)."""

from __future__ import annotations

import pytest

from testbed.operator_rails import run_operator_rails
from testbed.results import PASS, render_checks, render_table

pytestmark = [pytest.mark.integration, pytest.mark.netns]

# 19 checks of the 14.2 run, plus 14.3's: Ready conditions, generated objects, sources unchanged
# across a forced resync, and after the Pod: the withdrawn VFs and the failing claim.
CHECKS = 11 + 3
AFTER_TEARDOWN = 8 + 2


def test_two_rails_through_node_policies_and_sriov_networks(thick_stack) -> None:
    result = run_operator_rails(thick_stack)
    statuses = [c.status for c in result.checks]
    explain = render_table(result.rows) + "\n" + render_checks([*result.checks, *result.after_teardown])
    assert result.ok, explain + "\n" + thick_stack.logs()
    assert statuses == [PASS] * CHECKS, explain
    assert [c.status for c in result.after_teardown] == [PASS] * AFTER_TEARDOWN, explain
    rows = {r.request: r for r in result.rows}
    assert {r.rail for r in rows.values()} == {"rail-a", "rail-b"}
    # the sources are the operator-rendered NADs: <networkNamespace>/<SriovNetwork name>
    assert {r.source_nad for r in rows.values()} == {"ai-workloads/rail-a-net", "ai-workloads/rail-b-net"}
    assert len({r.gpu for r in rows.values()}) == 2
