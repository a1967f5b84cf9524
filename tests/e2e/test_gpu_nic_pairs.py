"""The product's main job end to end (spec 14.2, 14.4, 16.2) on the real control plane, the fake
SR-IOV node, the real driver and CNI processes and the real kubelet with containerd and runc
(testbed/stack.py, testbed/realnode.py); skipped, with the reason, where the real kubelet cannot
run.

These are the same scenario ``make demo`` prints, asserted; plus the 14.1 one-NAD pattern and a
second Pod on the same rails. The Pod lifecycle on the real kubelet is in
test_real_kubelet_lifecycle.py.
"""

from __future__ import annotations

import json

import pytest

from sriov_contract import keys
from testbed.checks import CNI_MODE_CHECK, STACK_DOWN_CHECK, check_addresses, check_shadows, teardown_checks
from testbed.results import PASS, SKIP, Result, render_checks, render_table
from testbed.scenario import applied, run_one_network, run_pairs, start_pod, stop_pod
from testbed.stack import Stack
from testbed.workloads import pairs_workload, second_pod
from tests.support.demo import run_demo

pytestmark = [pytest.mark.integration, pytest.mark.netns]


def explain(stack: Stack, result: Result) -> str:
    return (
        render_table(result.rows)
        + "\n"
        + render_checks([*result.checks, *result.after_teardown, *result.after_stop])
        + "\n"
        + stack.logs()
    )


def assert_all_pass(stack: Stack, result: Result, checks: int) -> None:
    statuses = [c.status for c in [*result.checks, *result.after_teardown]]
    assert result.ok, explain(stack, result)
    # every check ran: none was skipped, none silently missing
    assert statuses == [PASS] * checks, explain(stack, result)


def test_two_gpu_nic_pairs_thick(thick_stack) -> None:
    result = run_pairs(thick_stack)
    assert_all_pass(thick_stack, result, checks=19)
    rows = {r.request: r for r in result.rows}
    assert set(rows) == {"nic-0", "nic-1"}
    assert {r.interface for r in rows.values()} == {"dra0", "dra1"}
    # the two-root fixture exercises both rails: each pair landed on its own root and rail
    assert {r.rail for r in rows.values()} == {"rail-a", "rail-b"}
    assert {r.source_nad for r in rows.values()} == {"ai-workloads/rail-a-net", "ai-workloads/rail-b-net"}
    assert len({r.gpu for r in rows.values()}) == 2


def test_one_nad_deviceclass_pattern(thick_stack) -> None:
    result = run_one_network(thick_stack)
    assert_all_pass(thick_stack, result, checks=18)
    (row,) = result.rows
    assert (row.request, row.interface, row.rail, row.source_nad, row.gpu) == (
        "vf",
        "dra0",
        "rail-a",
        "ai-workloads/rail-a-net",
        "-",
    )


def test_second_pod_gets_different_addresses_from_the_same_rails(thick_stack) -> None:
    stack = thick_stack
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    template, second = second_pod(pairs)
    with applied(stack, pairs) as sources:
        stack.cluster.apply([template])
        try:
            first = start_pod(stack, pairs, pairs.pod, sources).observe()
            other = start_pod(stack, pairs, second, sources).observe()
            for obs in (first, other):
                assert check_addresses(stack, obs).status == PASS, check_addresses(stack, obs)
                assert check_shadows(obs, 2).status == PASS, check_shadows(obs, 2)
            assert {r.rail: r.source_nad for r in other.rows} == {r.rail: r.source_nad for r in first.rows}
            assert {r.rail for r in other.rows} == {"rail-a", "rail-b"}
            first_ips = {r.ip for r in first.rows}
            other_ips = {r.ip for r in other.rows}
            assert first_ips.isdisjoint(other_ips), (first_ips, other_ips)
            assert {r.vf_pci for r in first.rows}.isdisjoint({r.vf_pci for r in other.rows})
            assert not {s["metadata"]["name"] for s in first.shadows} & {
                s["metadata"]["name"] for s in other.shadows
            }
            # the second Pod's selections name only its own shadows
            names = {
                s["name"] for s in json.loads(other.pod["metadata"]["annotations"][keys.NETWORKS_ANNOTATION])
            }
            assert names == {s["metadata"]["name"] for s in other.shadows}
        finally:
            refs = [ref for pod in (pairs.pod, second) for ref in stop_pod(stack, pod)]
            stack.cluster.delete([template])
        after_teardown = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in after_teardown), render_checks(after_teardown)


def test_make_demo_entry_point_in_thin_mode_reports_json_and_exit_status(tool_dirs) -> None:
    """What `make demo` runs (scripts/demo.py, its own control plane), with the shim doing the work
    itself: the JSON report and the exit status are what a user or a script reads."""
    report = run_demo("--cni-mode", "thin")
    checks = [*report["checks"], *report["after_teardown"], *report["after_stop"]]
    assert report["ok"] and report["cni_mode"] == "thin", json.dumps(report)[:4000]
    assert [c["name"] for c in checks if c["status"] == SKIP] == [CNI_MODE_CHECK]
    assert [c for c in checks if c["status"] not in (PASS, SKIP)] == []
    # the demo checked what its stopped stack left, and found nothing
    assert [c["name"] for c in report["after_stop"]] == [STACK_DOWN_CHECK], json.dumps(report)[:4000]
    assert {r["interface"] for r in report["rows"]} == {"dra0", "dra1"}
    # the second scenario, spec 14.3 through sriov-operator, on the same stack
    rails = report["operator_rails"]
    rail_checks = [*rails["checks"], *rails["after_teardown"]]
    assert rails["ok"] and rails["scenario"] == "operator-rails", json.dumps(rails, indent=2)
    assert [c["name"] for c in rail_checks if c["status"] != PASS] == [CNI_MODE_CHECK]
    assert {r["source_nad"] for r in rails["rows"]} == {"ai-workloads/rail-a-net", "ai-workloads/rail-b-net"}
