"""The product's main job end to end (spec 14.2, 14.4, 16.2) on the real control plane, the fake
SR-IOV node, the real driver and CNI processes and the real kubelet with containerd and runc
(testbed/e2e.py, testbed/realnode.py); skipped, with the reason, where the real kubelet cannot
run.

These are the same scenario ``make demo`` prints, asserted; plus the 14.1 one-NAD pattern and a
second Pod on the same rails. The Pod lifecycle on the real kubelet is in
test_real_kubelet_lifecycle.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sriov_contract import keys
from testbed import e2e

pytestmark = [pytest.mark.integration, pytest.mark.netns]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT = 600  # the tools are built by the session's tool_dirs fixture, so this is the demo alone


def explain(stack: e2e.Stack, result: e2e.Result) -> str:
    return (
        e2e.render_table(result.rows)
        + "\n"
        + e2e.render_checks([*result.checks, *result.after_teardown, *result.after_stop])
        + "\n"
        + stack.logs()
    )


def assert_all_pass(stack: e2e.Stack, result: e2e.Result, checks: int) -> None:
    statuses = [c.status for c in [*result.checks, *result.after_teardown]]
    assert result.ok, explain(stack, result)
    # every check ran: none was skipped, none silently missing
    assert statuses == [e2e.PASS] * checks, explain(stack, result)


def test_two_gpu_nic_pairs_thick(thick_stack) -> None:
    result = e2e.run_pairs(thick_stack)
    assert_all_pass(thick_stack, result, checks=19)
    rows = {r.request: r for r in result.rows}
    assert set(rows) == {"nic-0", "nic-1"}
    assert {r.interface for r in rows.values()} == {"dra0", "dra1"}
    # the two-root fixture exercises both rails: each pair landed on its own root and rail
    assert {r.rail for r in rows.values()} == {"rail-a", "rail-b"}
    assert {r.source_nad for r in rows.values()} == {"ai-workloads/rail-a-net", "ai-workloads/rail-b-net"}
    assert len({r.gpu for r in rows.values()}) == 2


def test_one_nad_deviceclass_pattern(thick_stack) -> None:
    result = e2e.run_one_network(thick_stack)
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
    pairs = e2e.pairs_workload(stack.fake_node, stack.whereabouts_ipam())
    template, second = e2e.second_pod(pairs)
    with e2e.applied(stack, pairs) as sources:
        stack.apply([template])
        try:
            first = e2e.start_pod(stack, pairs, pairs.pod, sources).observe()
            other = e2e.start_pod(stack, pairs, second, sources).observe()
            for obs in (first, other):
                assert e2e.check_addresses(stack, obs).status == e2e.PASS, e2e.check_addresses(stack, obs)
                assert e2e.check_shadows(obs, 2).status == e2e.PASS, e2e.check_shadows(obs, 2)
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
            refs = [ref for pod in (pairs.pod, second) for ref in e2e.stop_pod(stack, pod)]
            stack.delete([template])
        after_teardown = e2e.teardown_checks(stack, pairs, refs)
        assert all(c.status == e2e.PASS for c in after_teardown), e2e.render_checks(after_teardown)


def test_make_demo_entry_point_in_thin_mode_reports_json_and_exit_status(tool_dirs) -> None:
    """What `make demo` runs (scripts/demo.py, its own control plane), with the shim doing the work
    itself: the JSON report and the exit status are what a user or a script reads."""
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "demo.py"), "-o", "json", "--cni-mode", "thin"],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-6000:]
    report = json.loads(out.stdout)
    checks = [*report["checks"], *report["after_teardown"], *report["after_stop"]]
    assert report["ok"] and report["cni_mode"] == "thin", out.stdout
    assert [c["name"] for c in checks if c["status"] == e2e.SKIP] == [e2e.CNI_MODE_CHECK]
    assert [c for c in checks if c["status"] not in (e2e.PASS, e2e.SKIP)] == []
    # the demo checked what its stopped stack left, and found nothing
    assert [c["name"] for c in report["after_stop"]] == [e2e.STACK_DOWN_CHECK], out.stdout
    assert {r["interface"] for r in report["rows"]} == {"dra0", "dra1"}
    # the second scenario, spec 14.3 through sriov-operator, on the same stack
    rails = report["operator_rails"]
    rail_checks = [*rails["checks"], *rails["after_teardown"]]
    assert rails["ok"] and rails["scenario"] == "operator-rails", json.dumps(rails, indent=2)
    assert [c["name"] for c in rail_checks if c["status"] != e2e.PASS] == [e2e.CNI_MODE_CHECK]
    assert {r["source_nad"] for r in rails["rows"]} == {"ai-workloads/rail-a-net", "ai-workloads/rail-b-net"}
