"""The network controller's decision per SriovNetwork: write only what changed, never take over."""

from __future__ import annotations

import copy

from sriov_operator.core.network import obsolete_nads, plan_network
from sriov_operator.core.sourcenad import desired_nad
from sriov_operator.reasons import NAD_INVALID, NAMESPACE_NOT_FOUND, NETWORK_READY
from tests.unit.sriov_operator.core.conftest import OPS, network


def decide(net, existing, *, exists=True):
    return plan_network(net, existing, namespace_exists=exists, operator_namespace=OPS, prefix="openshift.io")


def test_absent_nad_is_created_ready() -> None:
    d = decide(network(networkNamespace="ai-workloads"), None)
    assert (d.write, d.status, d.reason) == ("create", "True", NETWORK_READY)
    assert d.body["metadata"]["namespace"] == "ai-workloads"


def test_missing_target_namespace_waits() -> None:
    d = decide(network(networkNamespace="later"), None, exists=False)
    assert (d.write, d.status, d.reason) == ("none", "False", NAMESPACE_NOT_FOUND)
    assert "later does not exist" in d.message


def test_redirect_outside_the_operator_namespace_renders_nothing() -> None:
    d = decide(network("n", "apps", networkNamespace="x"), None)
    assert (d.write, d.status, d.reason) == ("none", "False", NAD_INVALID)


def test_unrenderable_network_is_invalid() -> None:
    d = decide(network("n", "apps", ipam="{"), None)
    assert (d.write, d.reason) == ("none", NAD_INVALID)


def test_an_unchanged_nad_is_not_rewritten() -> None:
    net = network("n", "apps")
    existing = desired_nad(net, "openshift.io")
    existing["metadata"]["resourceVersion"] = "7"
    d = decide(net, existing)
    assert (d.write, d.status) == ("none", "True")


def test_drift_is_repaired_keeping_foreign_metadata() -> None:
    net = network("n", "apps", uid="new")
    existing = desired_nad(network("n", "apps", uid="old"), "openshift.io")
    md = existing["metadata"]
    md["resourceVersion"] = "7"
    md["annotations"]["team"] = "x"
    md["ownerReferences"].append({"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c1"})
    existing["spec"]["config"] = existing["spec"]["config"].replace('"vlan": 0', '"vlan": 9')
    d = decide(net, existing)
    assert d.write == "update"
    assert d.body["metadata"]["resourceVersion"] == "7" and d.body["metadata"]["annotations"]["team"] == "x"
    assert [(r["kind"], r["uid"]) for r in d.body["metadata"]["ownerReferences"]] == [
        ("ConfigMap", "c1"),
        ("SriovNetwork", "new"),
    ]
    assert '"vlan": 0' in d.body["spec"]["config"]


def test_a_stale_owner_reference_alone_is_repaired_and_dropped_when_redirected() -> None:
    net = network("n", OPS, networkNamespace=OPS)
    existing = desired_nad(net, "openshift.io")
    existing["metadata"]["ownerReferences"] = [{"kind": "SriovNetwork", "name": "n", "uid": "gone"}]
    assert decide(net, existing).write == "update"
    redirected = network("n", OPS, networkNamespace="ai")
    stale = copy.deepcopy(desired_nad(redirected, "openshift.io"))
    stale["metadata"]["ownerReferences"] = [{"kind": "SriovNetwork", "name": "n", "uid": "x"}]
    d = decide(redirected, stale)
    assert d.write == "update" and "ownerReferences" not in d.body["metadata"]


def test_a_foreign_or_unmarked_nad_is_never_taken_over() -> None:
    net = network("n", "apps")
    foreign = desired_nad(network("n", "other"), "openshift.io")
    foreign["metadata"]["namespace"] = "apps"
    d = decide(net, foreign)
    assert (d.write, d.reason) == ("none", NAD_INVALID) and "owned by SriovNetwork" in d.message
    unmarked = {"metadata": {"name": "n", "namespace": "apps"}, "spec": {"config": "{}"}}
    d = decide(net, unmarked)
    assert (d.write, d.reason) == ("none", NAD_INVALID) and "was not created by the operator" in d.message


def test_a_deleting_nad_waits() -> None:
    net = network("n", "apps")
    existing = desired_nad(net, "openshift.io")
    existing["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert decide(net, existing).status == "False"


def test_obsolete_nads_are_ours_without_a_current_network() -> None:
    moved = network("m", OPS, networkNamespace="new")
    kept = desired_nad(network("k", "apps"), "")
    old = desired_nad(network("m", OPS, networkNamespace="old"), "")
    gone = desired_nad(network("g", "apps"), "")
    deleting = desired_nad(network("d", "apps"), "")
    deleting["metadata"]["deletionTimestamp"] = "now"
    foreign = {"metadata": {"name": "f", "namespace": "apps", "annotations": {"x": "y"}}}
    shadow = {"metadata": {"name": "s", "namespace": "apps"}}
    found = obsolete_nads([kept, old, gone, deleting, foreign, shadow], [network("k", "apps"), moved])
    assert [n["metadata"]["name"] for n in found] == ["m", "g"]
