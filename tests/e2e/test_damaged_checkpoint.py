"""A damaged checkpoint on the real kubelet v1.36.3 (issue 35 item 5): the driver's checkpoint and
its previous generation are both damaged and a killed write left its temp file while a managed Pod
runs. The restarted driver moves them aside, rebuilds the Pod's bindings from its shadows and
claims, registers, answers the kubelet's next prepare with the same shadows, and the Pod's deletion
leaves nothing behind (running_pairs' teardown checks)."""

from __future__ import annotations

import json

import pytest

from testbed.scenario import running_pairs
from testbed.stack import Stack

pytestmark = [pytest.mark.integration, pytest.mark.netns]


def test_both_generations_damaged_under_a_running_pod_lose_no_binding(thick_stack: Stack) -> None:
    stack = thick_stack
    node = stack.node_runtime
    driver = stack.host_driver
    with running_pairs(stack) as run:
        before = run.observe()
        claims = driver.checkpoint_claims()
        assert claims
        prepares = stack.kubelet.prepare_calls()

        assert driver.process is not None
        driver.process.stop()
        current = driver.checkpoint
        raw = current.read_bytes()
        current.write_bytes(raw[: len(raw) // 2])
        (current.parent / f".{current.name}.tmp.99999").write_bytes(raw[: len(raw) // 4])
        previous = current.with_name("checkpoint.prev.json")
        previous.write_bytes(previous.read_bytes()[:10] if previous.exists() else b"")
        driver.restart()  # waits until the kubelet registered it again: today it never does

        assert sorted(driver.checkpoint_claims()) == sorted(claims)
        phases = {
            d["managedBinding"]["phase"] for c in driver.checkpoint_claims().values() for d in c["devices"]
        }
        assert phases == {"Ready"}, phases
        recovery = json.loads((current.parent / "checkpoint.recovery.json").read_text())
        assert recovery["generation"] == "empty" and recovery["notRebuilt"] == []
        assert sorted(recovery["rebuiltClaims"]) == sorted(claims)
        assert len(list(current.parent.glob("*.damaged-*"))) == 3

        # a restarted kubelet has lost its prepared state: its next sandbox for the Pod prepares
        # again, answered from the rebuilt records with the same shadows and addresses
        node.restart_kubelet()
        driver.wait_advertised(run.workload.advertised)
        stack.gpus.publish()  # nobody republishes the stand-in GPU slices the kubelet deleted
        run.kill_sandbox()
        again = run.observe()
        assert stack.kubelet.prepare_calls() == prepares + 1
        assert {(s["metadata"]["name"], s["metadata"]["uid"]) for s in again.shadows} == {
            (s["metadata"]["name"], s["metadata"]["uid"]) for s in before.shadows
        }
        assert [(r.vf_pci, r.shadow_nad, r.interface, r.ip) for r in again.rows] == [
            (r.vf_pci, r.shadow_nad, r.interface, r.ip) for r in before.rows
        ]
