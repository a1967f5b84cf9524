"""sriov-operator against the real control plane, under its shipped RBAC (spec 12.2, 17.4).

Each test runs the operator as a subprocess with a one-hour resync, so every recovery shown here
comes from a watch event, not from a periodic pass.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from sriov_operator.core.sourcenad import desired_nad
from testbed import faults
from testbed.deployment import OPERATOR_SA, service_account_user
from testbed.waiting import wait_for
from tests.integration.operator.conftest import DUAL_RAIL, INTERFACES, network, rail_policy

pytestmark = pytest.mark.integration

DRA = "DRAConfigurationReady"
NAD_NAME = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName"
NAD_NS = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace"
GEN = "sriovnetwork.openshift.io/generated-by"
UID_LABEL = "sriovnetwork.openshift.io/node-policy-uid"


def two_rails(cluster, target: str) -> tuple[dict[str, Any], dict[str, Any]]:
    cluster.operator_config(dra=True)
    node = cluster.add_node(DUAL_RAIL)
    cluster.node_state(node, INTERFACES)
    for name in ("rail-a-net", "rail-b-net"):
        cluster.put("sriovnetworks", network(name, target))
    a = cluster.put(
        "sriovnetworknodepolicies", rail_policy("rail-a-policy", "ens1f0", "rail-a-net", cluster.ns)
    )
    b = cluster.put(
        "sriovnetworknodepolicies", rail_policy("rail-b-policy", "ens2f0", "rail-b-net", cluster.ns)
    )
    return a, b


def test_policies_applied_before_their_target_namespace_recover_when_it_appears(
    cluster, start_operator, testbed
) -> None:
    target = cluster.target_namespace(create=False)
    a, b = two_rails(cluster, target)
    start_operator()
    cluster.wait_condition("sriovnetworks", "rail-a-net", "Ready", "NamespaceNotFound")
    # The network's own Ready=False outranks the missing NAD it causes.
    cond = cluster.wait_condition("sriovnetworknodepolicies", "rail-a-policy", DRA, "SriovNetworkNotReady")
    assert "NamespaceNotFound" in cond["message"]
    assert f"dra-policy-{a['metadata']['uid']}-attrs" not in cluster.generated("deviceattributes")
    testbed.create_namespace(target)
    for policy in (a, b):
        cond = cluster.wait_condition(
            "sriovnetworknodepolicies", policy["metadata"]["name"], DRA, "DRAConfigurationApplied"
        )
        assert cond["status"] == "True" and cond["observedGeneration"] == policy["metadata"]["generation"]
    ready = cluster.condition("sriovnetworks", "rail-a-net", "Ready")
    assert ready and ready["status"] == "True" and ready["observedGeneration"] == 1
    attrs = cluster.generated("deviceattributes")
    got = attrs[f"dra-policy-{a['metadata']['uid']}-attrs"]
    assert got["metadata"]["labels"] == {GEN: "sriov-network-operator", UID_LABEL: a["metadata"]["uid"]}
    assert got["spec"]["attributes"] == {
        "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"},
        NAD_NAME: {"string": "rail-a-net"},
        NAD_NS: {"string": target},
    }
    assert attrs[f"dra-policy-{b['metadata']['uid']}-attrs"]["spec"]["attributes"][NAD_NAME] == {
        "string": "rail-b-net"
    }
    (node,) = cluster.nodes
    configs = cluster.generated("sriovresourcepolicies")[node]["spec"]["configs"]
    assert [c["deviceAttributesSelector"]["matchLabels"][UID_LABEL] for c in configs] == [
        a["metadata"]["uid"],
        b["metadata"]["uid"],
    ]
    nad = cluster.nad(target, "rail-a-net")
    assert nad is not None
    assert nad["metadata"]["annotations"]["sriovnetwork.openshift.io/owner-ref"] == (
        f"SriovNetwork.sriovnetwork.openshift.io/{cluster.ns}/rail-a-net"
    )


def test_a_no_op_resync_writes_nothing_and_keeps_source_nads_unchanged(
    cluster, start_operator, testbed, operator_identity
) -> None:
    target = cluster.target_namespace()
    two_rails(cluster, target)
    first = start_operator()
    cluster.wait_condition("sriovnetworknodepolicies", "rail-b-policy", DRA, "DRAConfigurationApplied")
    cluster.wait_condition("sriovnetworknodepolicies", "rail-a-policy", DRA, "DRAConfigurationApplied")
    before = cluster.nad(target, "rail-a-net")["metadata"]["resourceVersion"]
    first.stop()
    user = service_account_user(cluster.ns, OPERATOR_SA)[0]
    mark = testbed.audit.mark()
    second = start_operator()
    # A fresh process is a forced full resync of both controllers; each logs the end of its pass.
    wait_for(
        lambda: (
            "node-policy pass done: 0 write(s)" in (out := second.output())
            and "network pass done: 0 write(s)" in out
        ),
        20,
        what="both passes to end",
    )
    writes = [
        e for e in testbed.audit.events(since=mark, user=user)
        if e.verb in ("create", "update", "patch", "delete") and e.resource != "events"
    ]  # fmt: skip
    assert writes == []
    assert cluster.nad(target, "rail-a-net")["metadata"]["resourceVersion"] == before


def test_status_only_ready_transition_and_marker_removal_wake_the_policy_controller(
    cluster, start_operator
) -> None:
    """The test plays the network controller (--controllers node-policy): it writes the source NAD
    and the Ready condition itself, so stale generations and edited NADs are under its control."""
    target = cluster.target_namespace()
    cluster.operator_config(dra=True)
    node = cluster.add_node(DUAL_RAIL)
    cluster.node_state(node, INTERFACES)
    net = cluster.put("sriovnetworks", network("rail-a-net", target))
    nad = desired_nad(net, "openshift.io")
    cluster.objs.create_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", target, "network-attachment-definitions", nad
    )
    policy = cluster.put(
        "sriovnetworknodepolicies", rail_policy("rail-a-policy", "ens1f0", "rail-a-net", cluster.ns)
    )
    start_operator("--controllers", "node-policy")
    cluster.wait_condition("sriovnetworknodepolicies", "rail-a-policy", DRA, "SriovNetworkNotReady")

    def set_ready(observed: int) -> None:
        condition = {
            "type": "Ready", "status": "True", "reason": "NetworkReady", "message": "test",
            "observedGeneration": observed, "lastTransitionTime": "2026-01-01T00:00:00Z",
        }  # fmt: skip
        cluster.objs.patch_namespaced_custom_object_status(
            "sriovnetwork.openshift.io",
            "v1",
            cluster.ns,
            "sriovnetworks",
            "rail-a-net",
            {"status": {"conditions": [condition]}},
        )

    set_ready(observed=0)  # stale: an earlier generation's Ready does not count
    wait_for(
        lambda: (
            "generation 0"
            in (cluster.condition("sriovnetworknodepolicies", "rail-a-policy", DRA) or {}).get("message", "")
        ),
        20,
        what="the stale Ready to be reported",
    )
    set_ready(observed=1)
    cluster.wait_condition("sriovnetworknodepolicies", "rail-a-policy", DRA, "DRAConfigurationApplied")
    name = f"dra-policy-{policy['metadata']['uid']}-attrs"
    assert name in cluster.generated("deviceattributes")
    # Owner-marker removal is an update whose new object has no marker: the filter must remember it.
    cluster.objs.patch_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", target, "network-attachment-definitions", "rail-a-net",
        {"metadata": {"annotations": {"sriovnetwork.openshift.io/owner-ref": None}}},
    )  # fmt: skip
    cluster.wait_condition("sriovnetworknodepolicies", "rail-a-policy", DRA, "SourceNADNotReady")
    wait_for(
        lambda: name not in cluster.generated("deviceattributes"),
        20,
        what="the stale attributes to be withdrawn",
    )
    # The policy's filter and selector stay, so its VFs are blocked rather than re-routed.
    configs = cluster.generated("sriovresourcepolicies")[node]["spec"]["configs"]
    assert configs[0]["deviceAttributesSelector"]["matchLabels"][UID_LABEL] == policy["metadata"]["uid"]
    assert configs[0]["resourceFilters"] == [{"vendors": ["15b3"], "pfNames": ["ens1f0"], "linkType": "eth"}]


def test_pod_shadow_nad_events_trigger_no_rebuild(cluster, start_operator) -> None:
    target = cluster.target_namespace()
    two_rails(cluster, target)
    op = start_operator("--log-level", "DEBUG")
    cluster.wait_condition("sriovnetworknodepolicies", "rail-a-policy", DRA, "DRAConfigurationApplied")
    cluster.wait_condition("sriovnetworknodepolicies", "rail-b-policy", DRA, "DRAConfigurationApplied")
    idle = "sriov_operator.controllers.worker: node-policy idle"
    # Our own writes wake a last no-op pass; wait until the controller is quiet.
    wait_for(
        lambda: op.output().rfind(idle) > op.output().rfind("node-policy pass done"),
        20,
        what="a quiet controller",
    )
    shadow = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": "dra-sriov-shadow",
            "labels": {"sriovnetwork.k8snetworkplumbingwg.io/managed-by": "sriov-dra-driver"},
        },
        "spec": {"config": json.dumps({"cniVersion": "1.0.0", "type": "sriov"})},
    }
    cluster.objs.create_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", target, "network-attachment-definitions", shadow
    )
    seen = f"ADDED NetworkAttachmentDefinition {target}/dra-sriov-shadow: filtered for node-policy"
    wait_for(lambda: seen in op.output(), 20, what="the shadow's event to be filtered")
    assert "dra-sriov-shadow: enqueued" not in op.output()
    # Had the event been enqueued, the trigger would be set before that line, so a pass would
    # follow it before any quiet spell. (The watch is cluster-wide: other tests' objects may
    # legitimately enqueue passes, hence the cut at the next enqueued event.)
    wait_for(
        lambda: op.output().rfind(idle) > op.output().find(seen), 20, what="a quiet spell after the shadow"
    )
    after = op.output()[op.output().find(seen) :]
    cut = after.find("enqueued for node-policy")
    before_next_event = after if cut < 0 else after[:cut]
    assert "node-policy pass done" not in before_next_event
    assert idle in before_next_event or cut >= 0
    # The same watch delivers a referenced source NAD's change, and that one is enqueued.
    cluster.objs.patch_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", target, "network-attachment-definitions", "rail-a-net",
        {"metadata": {"labels": {"touched": "yes"}}},
    )  # fmt: skip
    touched = f"MODIFIED NetworkAttachmentDefinition {target}/rail-a-net: enqueued for node-policy"
    wait_for(lambda: touched in op.output(), 20, what="the source NAD's event to be enqueued")


def test_an_unowned_object_of_the_desired_name_is_never_adopted(cluster, start_operator) -> None:
    cluster.operator_config(dra=False)
    node = cluster.add_node(DUAL_RAIL)
    cluster.node_state(node, INTERFACES)
    policy = cluster.put("sriovnetworknodepolicies", rail_policy("attrs-only", "ens1f0", None, cluster.ns))
    start_operator()
    cluster.wait_condition("sriovnetworknodepolicies", "attrs-only", DRA, "DRAInactive")
    assert cluster.generated("deviceattributes") == {}
    name = f"dra-policy-{policy['metadata']['uid']}-attrs"
    squatter = {
        "apiVersion": "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1",
        "kind": "DeviceAttributes",
        "metadata": {"name": name, "namespace": cluster.ns},
        "spec": {"attributes": {"example.com/mine": {"string": "admin"}}},
    }
    created = cluster.objs.create_namespaced_custom_object(
        "sriovnetwork.k8snetworkplumbingwg.io", "v1alpha1", cluster.ns, "deviceattributes", squatter
    )
    cluster.operator_config(dra=True)
    cond = cluster.wait_condition("sriovnetworknodepolicies", "attrs-only", DRA, "DRAConfigurationSyncFailed")
    assert name in cond["message"] and "delete or rename it" in cond["message"]
    kept = cluster.generated("deviceattributes")[name]
    assert kept["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    # Removing it lets the operator create its own, and the policy becomes ready on that event.
    cluster.objs.delete_namespaced_custom_object(
        "sriovnetwork.k8snetworkplumbingwg.io", "v1alpha1", cluster.ns, "deviceattributes", name
    )
    cluster.wait_condition("sriovnetworknodepolicies", "attrs-only", DRA, "DRAConfigurationApplied")
    assert cluster.generated("deviceattributes")[name]["metadata"]["labels"][GEN] == "sriov-network-operator"
    # Provider off again: our objects go, the policy is staged.
    cluster.operator_config(dra=False)
    cluster.wait_condition("sriovnetworknodepolicies", "attrs-only", DRA, "DRAInactive")
    wait_for(
        lambda: (
            cluster.generated("deviceattributes") == {} and cluster.generated("sriovresourcepolicies") == {}
        ),
        20,
        what="generated objects removed",
    )


def test_a_failed_write_keeps_the_policy_unready_until_it_succeeds(
    cluster, fault_proxy, start_operator, operator_identity
) -> None:
    cluster.operator_config(dra=True)
    node = cluster.add_node(DUAL_RAIL)
    cluster.node_state(node, INTERFACES)
    proxy = fault_proxy(identity=operator_identity)
    rule = proxy.add_rule(faults.internal_error(), verb="create", resource="deviceattributes")
    cluster.put("sriovnetworknodepolicies", rail_policy("p", "ens1f0", None, cluster.ns))
    start_operator(kubeconfig=proxy.kubeconfig)
    cond = cluster.wait_condition("sriovnetworknodepolicies", "p", DRA, "DRAConfigurationSyncFailed")
    assert cond["status"] == "False" and "HTTP 500" in cond["message"]
    proxy.remove_rule(rule)
    cluster.wait_condition("sriovnetworknodepolicies", "p", DRA, "DRAConfigurationApplied", timeout=40)


def test_a_redirect_from_outside_the_operator_namespace_is_refused(cluster, start_operator, testbed) -> None:
    other = cluster.target_namespace()
    target = cluster.target_namespace()
    cluster.put("sriovnetworks", network("elsewhere", target), namespace=other)
    start_operator("--controllers", "network")
    cond = cluster.wait_condition(
        "sriovnetworks", "elsewhere", "Ready", "NetworkAttachmentDefinitionInvalid", namespace=other
    )
    assert "cannot be set when the resource is not in the operator namespace" in cond["message"]
    assert cluster.nad(target, "elsewhere") is None
    with pytest.raises(ApiException):
        cluster.objs.get_namespaced_custom_object(
            "k8s.cni.cncf.io", "v1", other, "network-attachment-definitions", "elsewhere"
        )


def test_what_was_deleted_while_the_operator_was_down_is_cleaned_when_it_returns(
    cluster, start_operator, testbed
) -> None:
    """Issue #35 item 8. No finalizer holds a SriovNetwork: the network controller's level-triggered
    sweep (NADs whose owner marker no SriovNetwork stands for) and the policy controller's
    desired-state diff find, on the first pass of a new process, what vanished in between. The
    cross-namespace NAD is the case an ownerReference cannot cover."""
    target = cluster.target_namespace()
    a, b = two_rails(cluster, target)
    cluster.put("sriovnetworks", network("local-net", None))
    first = start_operator()
    for policy in ("rail-a-policy", "rail-b-policy"):
        cluster.wait_condition("sriovnetworknodepolicies", policy, DRA, "DRAConfigurationApplied")
    cluster.wait_condition("sriovnetworks", "local-net", "Ready", "NetworkReady")
    assert cluster.nad(target, "rail-b-net") is not None and cluster.nad(cluster.ns, "local-net") is not None
    (node,) = cluster.nodes
    b_attrs = f"dra-policy-{b['metadata']['uid']}-attrs"
    assert b_attrs in cluster.generated("deviceattributes")
    first.stop()

    # While it is down: a rail's network and policy go, and so does a same-namespace network.
    for plural, name in (
        ("sriovnetworks", "rail-b-net"),
        ("sriovnetworknodepolicies", "rail-b-policy"),
        ("sriovnetworks", "local-net"),
    ):
        cluster.objs.delete_namespaced_custom_object(
            "sriovnetwork.openshift.io", "v1", cluster.ns, plural, name
        )
    start_operator()
    wait_for(
        lambda: cluster.nad(target, "rail-b-net") is None,
        20,
        what=f"the cross-namespace NAD {target}/rail-b-net to be deleted",
    )
    wait_for(
        lambda: b_attrs not in cluster.generated("deviceattributes"),
        20,
        what="the deleted policy's DeviceAttributes to be deleted",
    )
    configs = cluster.generated("sriovresourcepolicies")[node]["spec"]["configs"]
    assert [c["deviceAttributesSelector"]["matchLabels"][UID_LABEL] for c in configs] == [
        a["metadata"]["uid"]
    ]
    # The same-namespace NAD goes too, by the sweep or by its ownerReference, whichever is first.
    wait_for(
        lambda: cluster.nad(cluster.ns, "local-net") is None,
        30,
        what="the same-namespace NAD to be deleted",
    )
    # What was not deleted is untouched and still ready.
    assert cluster.nad(target, "rail-a-net") is not None
    cluster.wait_condition("sriovnetworknodepolicies", "rail-a-policy", DRA, "DRAConfigurationApplied")
