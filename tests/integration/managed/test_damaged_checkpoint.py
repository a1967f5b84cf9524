"""A damaged checkpoint is not a dead node (issue 35 item 5): the real driver under the shipped RBAC,
the real API server and the fake kubelet. A truncated, bit-flipped or half-written checkpoint is
moved aside, the driver starts from the previous generation (or rebuilds from its shadows and
claims), loses no binding, serves, says what happened, and every claim still releases cleanly."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.claims import allocated_claim
from testbed.managed_driver import ManagedAgent, put_nad, shadows, sriov_config, start_agent
from testbed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.usefixtures("released_workloads")]


def truncated(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 3])


def bit_flipped(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    path.write_bytes(bytes(raw))


def half_written(path: Path) -> None:
    """A torn write: the file holds the start of a document and a killed writer's temp file is left."""
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    (path.parent / f".{path.name}.tmp.99999").write_bytes(raw[: len(raw) // 4])


def both_generations(path: Path) -> None:
    truncated(path)
    previous = path.with_name("checkpoint.prev.json")
    if not previous.exists():  # a build that keeps no previous generation: nothing to fall back on
        previous.write_bytes(b"not a checkpoint")
    bit_flipped(previous)


def phases(agent: ManagedAgent) -> list[str]:
    return sorted(d["managedBinding"]["phase"] for r in agent.records().values() for d in r["devices"])


def node_events(agent: ManagedAgent) -> list[Any]:
    listed = client.CoreV1Api(agent.testbed.api_client).list_namespaced_event(
        "default", field_selector=f"involvedObject.kind=Node,involvedObject.name={agent.testbed.node_name}"
    )
    return [e for e in listed.items if e.reason == "CheckpointRecovered"]


@pytest.mark.parametrize(
    ("damage", "generation"),
    [
        (truncated, "previous"),
        (bit_flipped, "previous"),
        (half_written, "previous"),
        (both_generations, "empty"),
    ],
)
def test_a_damaged_checkpoint_loses_no_binding_and_tells_the_administrator(
    managed_agent: ManagedAgent,
    testbed: Any,
    k8s_namespace: str,
    policies: Any,
    classes: Any,
    damage: Callable[[Path], None],
    generation: str,
) -> None:
    ns = k8s_namespace
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(managed_agent, policies)
    claims = [allocated_claim(testbed, ns, classes.name_only, name) for name in ("one", "two")]
    for claim in claims:
        assert managed_agent.prepare(claim).error == ""
    before = {s["metadata"]["uid"] for s in shadows(testbed, ns)}
    assert phases(managed_agent) == ["Ready", "Ready"]
    events_before = len(node_events(managed_agent))

    managed_agent.stop()
    damage(managed_agent.checkpoint)
    damaged = managed_agent.checkpoint.read_bytes()
    managed_agent.start_and_register()  # today: CorruptCheckpoint, exit 2, never registers

    # no binding lost: both claims recorded, repair's first pass (before serving) adopted the shadows
    assert sorted(managed_agent.records()) == sorted(c["metadata"]["uid"] for c in claims)
    assert phases(managed_agent) == ["Ready", "Ready"]
    assert {s["metadata"]["uid"] for s in shadows(testbed, ns)} == before
    # the damaged file was moved aside, never deleted
    plugin_dir = managed_agent.checkpoint.parent
    (moved,) = plugin_dir.glob("checkpoint.json.damaged-*")
    assert moved.read_bytes() == damaged
    assert not list(plugin_dir.glob(".checkpoint.json.tmp.*"))
    # told: a warning line, the recovery record inspect reads, an Event on the Node
    recovery = json.loads((plugin_dir / "checkpoint.recovery.json").read_text())
    assert recovery["reason"] == "CheckpointRecovered" and recovery["generation"] == generation
    assert str(moved) in [q["movedTo"] for q in recovery["quarantined"]]
    assert "CheckpointRecovered" in managed_agent.output() and "Traceback" not in managed_agent.output()
    wait_for(lambda: len(node_events(managed_agent)) > events_before, 30, what="a CheckpointRecovered Event")

    # a prepare repeated by kubelet answers as before, and every claim still releases cleanly
    for claim in claims:
        assert managed_agent.prepare(claim).error == ""
        assert managed_agent.unprepare(claim) == ""
    assert managed_agent.records() == {}
    wait_for(lambda: shadows(testbed, ns) == [], 30, what="the released shadows to disappear")
