"""A repair pass of the real driver process on the real API server, counted in the audit log: one
listing each of the node's shadows, the node's Pods and the claims, and one read of the Node, per
pass, and no request of a healthy claim's own; a claim the listing shows drifted is repaired
through the per-claim live path alone, and a listing made stale before a claim's turn never
causes a write (the live path re-reads before it writes)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract.keys import NETWORKS_ANNOTATION, PROTECTION_FINALIZER
from sriov_dra import reasons
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.passdrift import PassListing
from sriov_dra.recovery.repair import RepairWorker
from testbed.audit import AuditEvent
from testbed.claims import allocated_claim, create_pod
from testbed.deployment import DRIVER_NAMESPACE, DRIVER_SA, service_account_user
from testbed.managed_driver import (
    IDENTITY,
    NAD,
    NADS,
    get_pod,
    put_nad,
    set_finalizers,
    shadows,
    sriov_config,
    start_agent,
)
from testbed.repair_service import in_process_service
from testbed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.usefixtures("released_workloads")]

CLAIMS = 3
SHADOWS = "network-attachment-definitions"
WRITES = frozenset({"create", "update", "patch", "delete"})
# Per pass: the shadows, the Pods and the claims listed, the Node read; the rest is headroom for
# the agent's other loops, which may land inside the window.
PASS_REQUESTS = 10
_SELECTIONS = "/metadata/annotations/" + NETWORKS_ANNOTATION.replace("/", "~1")


def _repair_list(event: AuditEvent) -> bool:
    """The repair worker's shadow listing: a plain list by label (the watch's carry watch=)."""
    return (
        event.verb == "list"
        and event.resource == SHADOWS
        and "labelSelector" in event.uri
        and "watch" not in event.uri
    )


def repair_lists(events: list[AuditEvent]) -> list[int]:
    """Positions of the repair worker's shadow listings."""
    return [i for i, e in enumerate(events) if _repair_list(e)]


_POD_LIST, _CLAIM_LIST = ("list", "pods"), ("list", "resourceclaims")


def pass_listings(events: list[AuditEvent]) -> list[tuple[int, Counter[tuple[str, str]]]]:
    """The driver's pass listings cut into passes, each with the position of its first request.

    A pass makes its listings at once, in any order, and has them all before the next pass
    begins, so a kind seen again starts the next pass: a pass that listed something twice, or
    not at all, shows as a group that is not one of each."""
    groups: list[tuple[int, Counter[tuple[str, str]]]] = []
    for i, e in enumerate(events):
        kind = ("list", SHADOWS) if _repair_list(e) else (e.verb, e.resource)
        if kind not in (("list", SHADOWS), _POD_LIST, _CLAIM_LIST):
            continue
        if not groups or kind in groups[-1][1]:
            groups.append((i, Counter()))
        groups[-1][1][kind] += 1
    return groups


def driver_passes(testbed, since: int, count: int) -> tuple[list[AuditEvent], list[int]]:
    """The driver's own requests since `since` once `count` pass listings are among them."""

    def passes() -> tuple[list[AuditEvent], list[int]] | None:
        events = testbed.audit.events(since=since)
        at = repair_lists(events)
        if len(at) < count:
            return None
        driver = events[at[0]].user
        mine = [e for e in events if e.user == driver]
        return mine, repair_lists(mine)

    got = wait_for(passes, 60, what=f"{count} repair passes of the driver in the audit log")
    assert got is not None
    return got


def drop_selections(testbed, ns: str, pod: str) -> None:
    """The Pod's network selections removed behind the driver's back (its registry stays)."""
    client.CoreV1Api(testbed.api_client).patch_namespaced_pod(
        pod, ns, [{"op": "remove", "path": _SELECTIONS}]
    )


def selections(testbed, ns: str, pod: str) -> list[dict[str, Any]]:
    text = (get_pod(testbed, ns, pod)["metadata"].get("annotations") or {}).get(NETWORKS_ANNOTATION)
    return json.loads(text) if text else []


def test_a_pass_over_healthy_claims_costs_its_listings_only_and_drift_takes_the_live_path(
    managed_agent, testbed, k8s_namespace, policies, classes, node_bound_kubeconfig
) -> None:
    ns = k8s_namespace
    managed_agent.env["REPAIR_INTERVAL"] = "1"
    # A token bound to a Pod on the node: status.devices writes succeed, so healthy means healthy.
    managed_agent.env["KUBECONFIG"] = str(node_bound_kubeconfig)
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(managed_agent, policies)
    claims = [allocated_claim(testbed, ns, classes.name_only, f"c{i}") for i in range(CLAIMS)]
    for claim in claims:
        assert managed_agent.prepare(claim).error == ""
    made = {s["metadata"]["name"]: s for s in shadows(testbed, ns)}
    assert len(made) == CLAIMS

    events, _at = driver_passes(testbed, testbed.audit.mark(), 4)
    passes = pass_listings(events)
    # Every pass seen whole (the first and the last may be cut by the window) lists each once.
    one_each = Counter({("list", SHADOWS): 1, _POD_LIST: 1, _CLAIM_LIST: 1})
    assert len(passes) >= 3 and all(kinds == one_each for _i, kinds in passes[1:-1]), passes
    # One whole pass: its first listing up to the next pass's.
    window = [e for e in events[passes[1][0] : passes[2][0]] if e.verb != "watch"]
    by_verb = Counter((e.verb, e.resource) for e in window)
    assert len(window) <= PASS_REQUESTS, by_verb
    assert [e for e in window if e.verb == "get" and e.resource in ("pods", "resourceclaims", SHADOWS)] == []
    assert [e for e in window if e.verb in WRITES] == [], by_verb

    # Drift the listing sees: one Pod lost its selections. Only that claim is read live and written.
    mark = testbed.audit.mark()
    drop_selections(testbed, ns, "pod-c0")
    wait_for(lambda: len(selections(testbed, ns, "pod-c0")) == 1, 30, what="pod-c0 selects its shadow again")
    events, _at = driver_passes(testbed, mark, 2)
    live = {
        (e.verb, e.resource, e.name)
        for e in events
        if e.verb in ("get", "patch") and e.resource in ("pods", "resourceclaims")
    }
    assert ("patch", "pods", "pod-c0") in live
    assert {name for _v, _r, name in live} <= {"pod-c0", "c0"}, live

    # A shadow deleted behind the driver's back is recreated with a new UID and our finalizer.
    name, gone = next(iter(made.items()))
    set_finalizers(testbed, ns, name, [])
    client.CustomObjectsApi(testbed.api_client).delete_namespaced_custom_object(*NAD, ns, NADS, name)

    def recreated() -> dict[str, Any] | None:
        now = {s["metadata"]["name"]: s for s in shadows(testbed, ns)}.get(name)
        return now if now is not None and now["metadata"]["uid"] != gone["metadata"]["uid"] else None

    again = wait_for(recreated, 30, what=f"shadow {name} recreated by repair")
    assert again["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    assert again["spec"] == gone["spec"]


def test_a_listing_made_stale_before_the_claims_turn_causes_no_write(
    managed_agent, testbed, k8s_namespace, policies, classes, tmp_path: Path
) -> None:
    """The listing shows the Pod without its selections; before the claim's turn the Pod is
    replaced by a new one of the same name. The live path re-reads claim and Pod, refuses, and
    writes nothing: acting on the listing would have published the old Pod's networks to the new."""
    ns = k8s_namespace
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(managed_agent, policies)
    claim = allocated_claim(testbed, ns, classes.name_only, "c")
    uid = claim["metadata"]["uid"]
    assert managed_agent.prepare(claim).error == ""
    managed_agent.stop()  # this process takes over its checkpoint
    drop_selections(testbed, ns, "pod-c")
    old_pod = get_pod(testbed, ns, "pod-c")["metadata"]["uid"]

    node = client.CoreV1Api(testbed.api_client).read_node(testbed.node_name).metadata
    assert node is not None
    api = testbed.client_for(IDENTITY)
    repairer, lister, checkpoint = in_process_service(
        api, managed_agent.checkpoint, testbed.node_name, str(node.uid), tmp_path
    )
    core = client.CoreV1Api(testbed.api_client)

    def pod_uid() -> str | None:
        try:
            return str(get_pod(testbed, ns, "pod-c")["metadata"]["uid"])
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def stale(records: Sequence[ClaimRecord]) -> PassListing:
        listing = lister.list_for_pass(records)
        core.delete_namespaced_pod("pod-c", ns, grace_period_seconds=0)
        wait_for(lambda: pod_uid() is None, 30, what="the old pod-c gone")
        create_pod(testbed, ns, "pod-c", [{"name": "vfs", "resourceClaimName": "c"}])
        return listing

    mark = testbed.audit.mark()
    outcomes = RepairWorker(repairer, checkpoint.snapshot_all, listing=stale).run_once()
    assert pod_uid() not in (None, old_pod)
    # Whichever the controllers got to first: the stale reservation, or the allocation, dropped.
    refusals = (
        reasons.POD_REPLACED,
        reasons.CLAIM_NOT_RESERVED,
        reasons.CLAIM_NOT_ALLOCATED,
        reasons.POD_ON_OTHER_NODE,
    )
    assert outcomes[uid] in refusals, outcomes
    assert selections(testbed, ns, "pod-c") == []
    user, _groups = service_account_user(DRIVER_NAMESPACE, DRIVER_SA)
    mine = [e for e in testbed.audit.events(since=mark) if e.user == user]
    assert [(e.verb, e.resource) for e in mine if e.verb == "list" and e.resource == "pods"] == [
        ("list", "pods")
    ]
    assert [(e.verb, e.resource, e.name) for e in mine if e.verb in WRITES] == []

    # kubelet still releases it: the agent back, the claim unprepared, its shadow gone.
    api.close()
    managed_agent.start_and_register()
    assert managed_agent.unprepare(claim) == ""
    wait_for(lambda: shadows(testbed, ns) == [], 30, what="the shadow released")
