"""The repair worker, crash recovery and the orphan scan on the real API server, with the real
driver process under the shipped RBAC (spec 8.3, 8.5). No sleeps: every wait polls a real
condition (an Event, a metric, an object) with a deadline."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract.binding import SourceRef
from sriov_contract.identity import BindingIdentity
from sriov_contract.keys import (
    BINDING_ANNOTATION,
    NETWORKS_ANNOTATION,
    PROTECTION_FINALIZER,
    PROTOCOL_VERSION,
    REGISTRY_ANNOTATION,
)
from sriov_dra.core.bindingrecord import BindingRecord
from sriov_dra.core.shadowspec import shadow_object
from sriov_dra.model import DRIVER_NAME
from sriov_dra.prepare.crashpoints import CRASH_ENV, CRASH_EXIT, PREPARE_STEPS, UNPREPARE_STEPS
from sriov_dra.state.cdi import CdiDir
from testbed import faults
from testbed.apiobjects import as_object
from testbed.claims import allocated_claim, custom_objects
from testbed.deployment import DRIVER_NAMESPACE
from testbed.managed_driver import (
    IDENTITY,
    NAD,
    NADS,
    get_pod,
    pod_networks,
    put_nad,
    set_finalizers,
    shadows,
    sriov_config,
    start_agent,
)
from testbed.node_agent import put_policy, wait_published
from testbed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.usefixtures("released_workloads")]

CLI = str(Path(sys.executable).parent / "sriov-dra")
ADVERTISED = "advertised devices changed"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metric(port: int, name: str, labels: dict[str, str]) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return 0.0


def events(testbed, namespace: str, uid: str, reason: str) -> list[Any]:
    got = client.CoreV1Api(testbed.api_client).list_namespaced_event(namespace)
    return [e for e in got.items if e.involved_object.uid == uid and e.reason == reason]


def allocated(agent, testbed, ns: str, classes, policies) -> dict[str, Any]:
    """The agent started with a source NAD in `ns`, and claim `c` (and Pod `pod-c`) allocated."""
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(agent, policies)
    return allocated_claim(testbed, ns, classes.name_only, "c")


def prepared(agent, testbed, ns: str, classes, policies, **env: str) -> dict[str, Any]:
    agent.env.update({"REPAIR_INTERVAL": "1", **env})
    claim = allocated(agent, testbed, ns, classes, policies)
    out = agent.prepare(claim)
    assert out.error == "", out.error
    return claim


def assert_whole(agent, testbed, ns: str, claim: dict[str, Any]) -> dict[str, Any]:
    """One protected shadow, named with its UID in the Pod's registry and selection, Ready."""
    (shadow,) = shadows(testbed, ns)
    assert shadow["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    assert not shadow["metadata"].get("deletionTimestamp")
    nets, registry = pod_networks(testbed, ns, "pod-c")
    assert [n["name"] for n in nets] == [shadow["metadata"]["name"]]
    assert [e.uid for e in registry.entries] == [shadow["metadata"]["uid"]]
    (device,) = agent.records()[claim["metadata"]["uid"]]["devices"]
    assert device["managedBinding"]["phase"] == "Ready"
    assert device["managedBinding"]["shadowUID"] == shadow["metadata"]["uid"]
    return shadow


def assert_released(agent, testbed, ns: str) -> None:
    wait_for(lambda: shadows(testbed, ns) == [], 30, what="no shadow left")
    assert agent.records() == {}
    assert pod_networks(testbed, ns, "pod-c") == ([], None)
    assert list(agent.dirs.cdi.iterdir()) == []


def test_deleted_shadow_is_never_recreated_while_terminating_and_is_once_gone(
    managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    ns, port = k8s_namespace, free_port()
    claim = prepared(managed_agent, testbed, ns, classes, policies, METRICS_PORT=str(port))
    shadow = assert_whole(managed_agent, testbed, ns, claim)
    name, old_uid = shadow["metadata"]["name"], shadow["metadata"]["uid"]
    pod_uid = get_pod(testbed, ns, "pod-c")["metadata"]["uid"]

    custom_objects(testbed).delete_namespaced_custom_object(*NAD, ns, NADS, name)
    reason = {"operation": "repair", "reason": "ShadowDeletionPending"}
    # two passes saw it Terminating (the second after backoff): neither recreated nor released
    wait_for(lambda: metric(port, "sriov_dra_failures_total", reason) >= 2, 30, what="two repair passes")
    (held,) = shadows(testbed, ns)
    assert held["metadata"]["uid"] == old_uid and held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    assert (
        managed_agent.records()[claim["metadata"]["uid"]]["devices"][0]["managedBinding"]["phase"] == "Ready"
    )
    # reported once on the Pod and once on the claim, not once per pass (the agent's Event sender
    # writes them in the background, so the first may still be on its way)
    for uid in (pod_uid, claim["metadata"]["uid"]):

        def reported(uid: str = uid) -> list[Any]:
            return events(testbed, ns, uid, "ShadowDeletionPending")

        assert len(wait_for(reported, 30, what="the ShadowDeletionPending Event")) == 1

    set_finalizers(testbed, ns, name, [])  # now it is truly gone: repair recreates it
    again = wait_for(
        lambda: next((s for s in shadows(testbed, ns) if s["metadata"]["uid"] != old_uid), None),
        30,
        what="the shadow recreated from the frozen bytes",
    )
    assert again["spec"] == shadow["spec"] and again["metadata"]["name"] == name
    wait_for(
        lambda: pod_networks(testbed, ns, "pod-c")[1].entries[0].uid == again["metadata"]["uid"],
        30,
        what="the Pod registry naming the new shadow UID",
    )
    assert_whole(managed_agent, testbed, ns, claim)
    assert metric(port, "sriov_dra_bindings", {"phase": "Ready"}) == 1
    assert managed_agent.unprepare(claim) == ""
    assert_released(managed_agent, testbed, ns)


SLICE_WRITES = {"create": "create", "update": "replace", "delete": "delete"}  # API verb -> label


def test_metrics_count_slice_writes_api_errors_and_repair_passes(
    managed_agent, testbed, k8s_namespace, policies, classes, fault_proxy
) -> None:
    ns, port = k8s_namespace, free_port()
    proxy = fault_proxy(identity=IDENTITY)
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    managed_agent.env.update(
        {"REPAIR_INTERVAL": "1", "METRICS_PORT": str(port), "KUBECONFIG": str(proxy.kubeconfig)}
    )
    start_agent(managed_agent, policies)

    # a narrower policy makes the agent rewrite its slices: every write is counted, once
    rail_a = managed_agent.fake_node.rail_vfs("rail-a")
    narrower = {"configs": [{"resourceFilters": [{"pfNames": sorted({v.pf for v in rail_a})}]}]}
    put_policy(testbed, DRIVER_NAMESPACE, f"vfs-{policies.tag}", narrower)  # start_agent's, replaced
    names = {v.pci.replace(":", "-").replace(".", "-") for v in rail_a}
    wait_published(testbed, lambda p: set(p) == names, "only rail-a VFs advertised")

    def slice_writes() -> dict[str, float]:
        return {
            label: metric(port, "sriov_dra_resourceslice_writes_total", {"operation": label})
            for label in SLICE_WRITES.values()
        }

    def proxied_writes() -> dict[str, float]:
        done = [r for r in proxy.requests_for(resource="resourceslices") if r.verb in SLICE_WRITES]
        return {
            label: float(sum(1 for r in done if SLICE_WRITES[r.verb] == label and r.status < 300))
            for label in SLICE_WRITES.values()
        }

    wait_for(lambda: slice_writes() == proxied_writes(), 10, what="the slice write counters")
    assert sum(slice_writes().values()) >= 1

    # a Forbidden Pod patch fails the prepare and is counted under its HTTP status
    assert metric(port, "sriov_dra_api_errors_total", {"status": "403"}) == 0
    proxy.add_rule(faults.forbidden(), namespace=ns, verb="patch", resource="pods", times=1)
    claim = allocated_claim(testbed, ns, classes.name_only, "c")
    out = managed_agent.prepare(claim)
    assert out.error.startswith("AccessDenied:"), out.error
    assert metric(port, "sriov_dra_api_errors_total", {"status": "403"}) == 1
    assert metric(port, "sriov_dra_failures_total", {"operation": "prepare", "reason": "AccessDenied"}) == 1

    # the repair worker, not kubelet, finishes the binding; its passes are timed
    passes = metric(port, "sriov_dra_repair_duration_seconds_count", {})
    wait_for(lambda: metric(port, "sriov_dra_bindings", {"phase": "Ready"}) == 1, 30, what="repair to Ready")
    wait_for(
        lambda: metric(port, "sriov_dra_repair_duration_seconds_count", {}) > passes, 30, what="a repair pass"
    )
    assert metric(port, "sriov_dra_repair_duration_seconds_sum", {}) > 0
    assert_whole(managed_agent, testbed, ns, claim)
    assert managed_agent.unprepare(claim) == ""
    assert_released(managed_agent, testbed, ns)


def test_stripped_registry_selection_and_finalizer_are_restored(
    managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    ns = k8s_namespace
    claim = prepared(managed_agent, testbed, ns, classes, policies)
    before = pod_networks(testbed, ns, "pod-c")
    client.CoreV1Api(testbed.api_client).patch_namespaced_pod(
        "pod-c", ns, {"metadata": {"annotations": {REGISTRY_ANNOTATION: None, NETWORKS_ANNOTATION: None}}}
    )
    assert pod_networks(testbed, ns, "pod-c") == ([], None)
    wait_for(lambda: pod_networks(testbed, ns, "pod-c") == before, 30, what="the registry restored")
    assert_whole(managed_agent, testbed, ns, claim)

    # someone strips the protection finalizer from the live shadow: it is put back on the same object
    (shadow,) = shadows(testbed, ns)
    set_finalizers(testbed, ns, shadow["metadata"]["name"], ["example.com/keep"])
    wait_for(
        lambda: PROTECTION_FINALIZER in shadows(testbed, ns)[0]["metadata"].get("finalizers", []),
        30,
        what="the protection finalizer restored",
    )
    (again,) = shadows(testbed, ns)
    assert again["metadata"]["uid"] == shadow["metadata"]["uid"]
    assert again["metadata"]["finalizers"] == ["example.com/keep", PROTECTION_FINALIZER]
    set_finalizers(testbed, ns, shadow["metadata"]["name"], [PROTECTION_FINALIZER])
    assert managed_agent.unprepare(claim) == ""
    assert_released(managed_agent, testbed, ns)


def restart(agent) -> None:
    """Start the agent and wait for its first policy pass (until then no VF is eligible)."""
    seen = agent.output().count(ADVERTISED)
    agent.start_and_register()
    wait_for(lambda: agent.output().count(ADVERTISED) > seen, 30, what="the agent's first policy pass")


def crash_and_restart(agent, step: str, call) -> None:
    agent.stop()
    agent.env[CRASH_ENV] = step
    restart(agent)
    try:
        call()
    except Exception as exc:  # the process died mid-call: kubelet sees a transport error
        assert (
            "UNAVAILABLE" in str(exc) or "unavailable" in str(exc).lower() or "Socket closed" in str(exc)
        ), exc
    assert agent.proc.wait(30) == CRASH_EXIT, agent.output()[-3000:]
    agent.proc = None
    # a killed process leaves its registration socket behind; the fake kubelet must not dial it
    for stale in agent.dirs.registry.glob("*.sock"):
        stale.unlink()
    del agent.env[CRASH_ENV]
    restart(agent)


@pytest.mark.parametrize("step", PREPARE_STEPS)
def test_killed_at_each_prepare_step_converges(
    step, managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    ns = k8s_namespace
    managed_agent.env[CRASH_ENV] = step
    claim = allocated(managed_agent, testbed, ns, classes, policies)
    crash_and_restart(managed_agent, step, lambda: managed_agent.prepare(claim))
    left = shadows(testbed, ns)
    out = managed_agent.prepare(claim)  # kubelet retries
    assert out.error == "", out.error
    shadow = assert_whole(managed_agent, testbed, ns, claim)
    # A shadow created before the kill (even one whose UID never reached the checkpoint) is
    # adopted as it is: same object, same attachment ID and frozen config, never a second one.
    assert [_frozen(s) for s in left] in ([], [_frozen(shadow)])
    assert managed_agent.unprepare(claim) == ""
    assert_released(managed_agent, testbed, ns)


def _frozen(shadow: dict[str, Any]) -> tuple[str, str, Any]:
    meta = shadow["metadata"]
    return meta["uid"], meta["annotations"][BINDING_ANNOTATION], shadow["spec"]


def test_killed_before_the_pending_record_then_unprepared_leaves_nothing(
    managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    """The kill after the claim's CDI spec is written and before the Pending record: nothing was
    answered to kubelet, so kubelet may unprepare instead of retrying; that removes the spec."""
    ns = k8s_namespace
    claim = allocated(managed_agent, testbed, ns, classes, policies)
    crash_and_restart(managed_agent, "prepare-host", lambda: managed_agent.prepare(claim))
    assert managed_agent.records() == {}
    assert list(managed_agent.dirs.cdi.iterdir()) == [
        CdiDir(managed_agent.dirs.cdi).path(claim["metadata"]["uid"])
    ]
    assert managed_agent.unprepare(claim) == ""
    assert_released(managed_agent, testbed, ns)


@pytest.mark.parametrize("step", UNPREPARE_STEPS)
def test_killed_at_each_unprepare_step_converges(
    step, managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    ns = k8s_namespace
    claim = prepared(managed_agent, testbed, ns, classes, policies)
    crash_and_restart(managed_agent, step, lambda: managed_agent.unprepare(claim))
    # the release was authorized before the crash: the start-up repair finishes it on its own
    wait_for(lambda: managed_agent.records() == {}, 30, what="the repair worker to finish the release")
    assert_released(managed_agent, testbed, ns)
    assert managed_agent.unprepare(claim) == ""  # kubelet's retry finds nothing left to do


def test_orphan_scan_reports_a_protected_shadow_without_checkpoint_and_leaves_it(
    managed_agent, testbed, k8s_namespace, second_namespace, policies, classes
) -> None:
    ns = k8s_namespace
    claim = prepared(managed_agent, testbed, ns, classes, policies)
    # a protected shadow of this node in a namespace no checkpoint record mentions (a lost checkpoint)
    record = BindingRecord(
        phase="Ready",
        identity=BindingIdentity(
            PROTOCOL_VERSION,
            testbed.node_uid,
            str(uuid.uuid4()),
            str(uuid.uuid4()),
            DRIVER_NAME,
            testbed.node_name,
            "0000-99-00-1",
        ),
        node_name=testbed.node_name,
        pod_namespace=second_namespace,
        pod_name="gone",
        plan_index=0,
        interface="dra0",
        pci_address="0000:99:00.1",
        source=SourceRef(second_namespace, "rail-x", str(uuid.uuid4()), "1"),
        config=sriov_config("rail-x", "198.51.100.0/24"),
    )
    body = shadow_object(record)
    del body["metadata"]["ownerReferences"]  # no owner: GC must not be the one to act here
    body["metadata"]["finalizers"].append("example.com/keep")
    made = as_object(
        custom_objects(testbed).create_namespaced_custom_object(*NAD, second_namespace, NADS, body)
    )
    base = [CLI, "orphans", "--node", testbed.node_name, "--kubeconfig", str(testbed.kubeconfig)]
    base += ["--checkpoint", str(managed_agent.checkpoint)]

    out = subprocess.run([*base, "-o", "json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["orphans"] == [record.attachment_id]
    by_name = {s["name"]: s for s in doc["shadows"]}
    assert by_name[record.shadow_name]["status"] == "Orphan" and by_name[record.shadow_name]["protected"]
    assert {s["status"] for n, s in by_name.items() if n != record.shadow_name} == {"Ready"}
    assert doc["foreignFinalizers"] == [
        {"namespace": second_namespace, "name": record.shadow_name, "finalizers": ["example.com/keep"]}
    ]
    text = subprocess.run(base, capture_output=True, text=True, timeout=60).stdout
    assert "1 orphan(s) of 2 shadow(s); dry run, nothing changed" in text

    # neither the dry run nor the running driver's repair passes touched it
    wait_for(lambda: managed_agent.records()[claim["metadata"]["uid"]], 5, what="the agent running")
    now = as_object(
        custom_objects(testbed).get_namespaced_custom_object(*NAD, second_namespace, NADS, record.shadow_name)
    )
    assert now["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]

    # another well-formed attachment ID, whatever the random UIDs made the real one end in
    other = record.attachment_id[:-1] + ("1" if record.attachment_id.endswith("0") else "0")
    wrong = subprocess.run([*base, "--finalize", other], capture_output=True, text=True)
    assert wrong.returncode == 2 and "NotAnOrphan" in wrong.stderr
    done = subprocess.run(
        [*base, "--finalize", record.attachment_id], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "foreign finalizers kept: example.com/keep" in done.stdout
    left = as_object(
        custom_objects(testbed).get_namespaced_custom_object(*NAD, second_namespace, NADS, record.shadow_name)
    )
    assert left["metadata"]["finalizers"] == ["example.com/keep"] and left["metadata"]["deletionTimestamp"]
    set_finalizers(testbed, second_namespace, record.shadow_name, [])
    assert managed_agent.unprepare(claim) == ""
    assert_released(managed_agent, testbed, ns)
