"""A repair pass of the real driver process on the real API server, counted in the audit log: one
list of the node's shadows per pass and no read of a healthy shadow, while a shadow deleted behind
the driver's back is still recreated."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kubernetes import client

from sriov_contract.keys import PROTECTION_FINALIZER
from tests.bed.audit import AuditEvent
from tests.bed.claims import allocated_claim
from tests.bed.managed_driver import NAD, NADS, put_nad, set_finalizers, shadows, sriov_config, start_agent
from tests.bed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.usefixtures("released_workloads")]

CLAIMS = 3
SHADOWS = "network-attachment-definitions"


def repair_lists(events: list[AuditEvent]) -> list[int]:
    """Positions of the repair worker's shadow listings (a plain list; the watch's carry watch=)."""
    return [
        i
        for i, e in enumerate(events)
        if e.verb == "list" and e.resource == SHADOWS and "labelSelector" in e.uri and "watch" not in e.uri
    ]


def test_a_pass_over_healthy_bindings_lists_once_and_reads_no_shadow(
    managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    ns = k8s_namespace
    managed_agent.env["REPAIR_INTERVAL"] = "1"
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(managed_agent, policies)
    claims = [allocated_claim(testbed, ns, classes.name_only, f"c{i}") for i in range(CLAIMS)]
    for claim in claims:
        assert managed_agent.prepare(claim).error == ""
    made = {s["metadata"]["name"]: s for s in shadows(testbed, ns)}
    assert len(made) == CLAIMS

    mark = testbed.audit.mark()

    def two_passes() -> tuple[list[AuditEvent], list[int]] | None:
        events = testbed.audit.events(since=mark)
        at = repair_lists(events)
        if len(at) < 3:
            return None
        driver = events[at[0]].user  # the driver's own requests only
        mine = [e for e in events if e.user == driver]
        return mine, repair_lists(mine)

    got = wait_for(two_passes, 30, what="three repair passes of the driver in the audit log")
    assert got is not None
    events, at = got
    # One whole pass lies between two listings that complete one after the other.
    window = events[at[1] + 1 : at[2]]
    by_verb = Counter((e.verb, e.resource) for e in window)
    assert [e for e in window if e.resource == SHADOWS] == [], by_verb
    # Each claim is still verified live (its claim and Pod); only the shadow reads are gone.
    assert by_verb[("get", "resourceclaims")] >= CLAIMS and by_verb[("get", "pods")] >= CLAIMS, by_verb

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
