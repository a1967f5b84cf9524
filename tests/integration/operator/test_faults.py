"""API faults on sriov-operator's writes, injected on the wire by the bed's fault proxy in front of
the real API server (testbed/faultproxy.py), under the shipped RBAC.

Each cell: the fault fires, the affected condition says so (or the lost reply goes unnoticed),
and once the API behaves the controllers converge by themselves (every reaction here comes from
the failed pass's own retry: the resync is an hour) with exactly the objects they should own: no
duplicate, no leftover, conditions for the current generation.
"""

from __future__ import annotations

from typing import Any

import pytest

from testbed import faults
from testbed.waiting import wait_for
from tests.integration.operator.conftest import DUAL_RAIL, INTERFACES, network, rail_policy

pytestmark = pytest.mark.integration

DRA = "DRAConfigurationReady"
APPLIED = "DRAConfigurationApplied"
POLICIES = "sriovnetworknodepolicies"
UID_LABEL = "sriovnetwork.openshift.io/node-policy-uid"


@pytest.fixture
def proxied(cluster, fault_proxy, start_operator, operator_identity):
    """A DRA-enabled cluster with one selected node, and the operator behind a fault proxy;
    `start()` runs the operator once the test has added its rules."""
    cluster.operator_config(dra=True)
    node = cluster.add_node(DUAL_RAIL)
    cluster.node_state(node, INTERFACES)
    proxy = fault_proxy(identity=operator_identity)
    return proxy, lambda *args: start_operator(*args, kubeconfig=proxy.kubeconfig)


def applied(cluster, name: str, generation: int = 1) -> dict[str, Any]:
    """Wait for DRAConfigurationApplied of exactly `generation` (an older one may still be there)."""

    def current() -> dict[str, Any] | None:
        cond: dict[str, Any] | None = cluster.condition(POLICIES, name, DRA)
        ok = cond and cond["reason"] == APPLIED and cond["observedGeneration"] == generation
        return cond if ok else None

    try:
        cond: dict[str, Any] = wait_for(current, 40, what=f"{name} applied at generation {generation}")
    except Exception:
        raise AssertionError(f"{name}: {cluster.condition(POLICIES, name, DRA)}") from None
    assert cond["status"] == "True", cond
    return cond


def policy_objects(cluster) -> dict[str, list[str]]:
    """Generated DeviceAttributes per policy UID: exactly one each when converged."""
    out: dict[str, list[str]] = {}
    for name, obj in cluster.generated("deviceattributes").items():
        out.setdefault(obj["metadata"]["labels"][UID_LABEL], []).append(name)
    return out


def test_forbidden_node_config_write_withholds_ready_then_converges(cluster, proxied) -> None:
    proxy, start = proxied
    rule = proxy.add_rule(faults.forbidden(), verb="create", resource="sriovresourcepolicies")
    a = cluster.put(POLICIES, rail_policy("a", "ens1f0", None, cluster.ns))
    b = cluster.put(POLICIES, rail_policy("b", "ens2f0", None, cluster.ns))
    start()
    for name in ("a", "b"):
        # both policies' node config is the refused write: neither may claim Ready
        cond = cluster.wait_condition(POLICIES, name, DRA, "DRAConfigurationSyncFailed")
        assert cond["status"] == "False"
        assert "HTTP 403" in cond["message"] and "deploy/operator/rbac.yaml" in cond["message"]
    (node,) = cluster.nodes
    assert node not in cluster.generated("sriovresourcepolicies")
    proxy.remove_rule(rule)
    for name in ("a", "b"):
        applied(cluster, name)
    assert policy_objects(cluster) == {
        a["metadata"]["uid"]: [f"dra-policy-{a['metadata']['uid']}-attrs"],
        b["metadata"]["uid"]: [f"dra-policy-{b['metadata']['uid']}-attrs"],
    }
    assert len(cluster.generated("sriovresourcepolicies")[node]["spec"]["configs"]) == 2


def test_conflicts_on_an_update_and_on_the_status_write_are_retried_to_the_current_generation(
    cluster, proxied
) -> None:
    proxy, start = proxied
    created = cluster.put(POLICIES, rail_policy("p", "ens1f0", None, cluster.ns))
    uid = created["metadata"]["uid"]
    start()
    applied(cluster, "p")
    # the next DeviceAttributes update and the next status write each meet a 409 once
    update = proxy.add_rule(faults.conflict(), verb="update", resource="deviceattributes", times=1)
    status = proxy.add_rule(faults.conflict(), verb="patch", resource=POLICIES, subresource="status", times=1)
    cluster.objs.patch_namespaced_custom_object(
        "sriovnetwork.openshift.io",
        "v1",
        cluster.ns,
        POLICIES,
        "p",
        {"spec": {"dra": {"attributes": {"example.com/rail": {"string": "a"}}}}},
    )
    applied(cluster, "p", generation=2)
    assert (update.fired, status.fired) == (1, 1)
    (obj,) = cluster.generated("deviceattributes").values()
    assert obj["metadata"]["name"] == f"dra-policy-{uid}-attrs"
    assert obj["spec"]["attributes"]["example.com/rail"] == {"string": "a"}


def test_a_lost_create_response_leaves_exactly_one_object_and_ready(cluster, proxied) -> None:
    """The create happened, its reply never arrived: the next pass finds the object by its
    deterministic name and does not create a second or report a failure it cannot see."""
    proxy, start = proxied
    rule = proxy.add_rule(faults.response_lost(), verb="create", resource="deviceattributes", times=1)
    policy = cluster.put(POLICIES, rail_policy("p", "ens1f0", None, cluster.ns))
    start()
    applied(cluster, "p")
    assert rule.fired == 1
    uid = policy["metadata"]["uid"]
    assert policy_objects(cluster) == {uid: [f"dra-policy-{uid}-attrs"]}
    creates = proxy.requests_for(verb="create", resource="deviceattributes")
    # the lost one reached the apiserver (201) and no later create was needed
    assert [(r.status, r.fault is not None) for r in creates] == [(201, True)]


def test_a_lost_nad_create_response_leaves_one_source_nad_and_ready(cluster, proxied) -> None:
    proxy, start = proxied
    target = cluster.target_namespace()
    rule = proxy.add_rule(
        faults.response_lost(), verb="create", resource="network-attachment-definitions", times=1
    )
    cluster.put("sriovnetworks", network("rail-a-net", target))
    start("--controllers", "network")
    cond = cluster.wait_condition("sriovnetworks", "rail-a-net", "Ready", "NetworkReady", timeout=40)
    assert cond["status"] == "True" and cond["observedGeneration"] == 1
    assert rule.fired == 1
    nads = cluster.objs.list_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", target, "network-attachment-definitions"
    )["items"]
    assert [n["metadata"]["name"] for n in nads] == ["rail-a-net"]
    creates = proxy.requests_for(verb="create", resource="network-attachment-definitions")
    assert [r.status for r in creates] == [201]


def test_a_lost_invalidation_delete_response_converges_without_ready(cluster, proxied) -> None:
    """Spec 12.2.5: the invalidating delete of an unresolved policy's object; its reply is lost,
    so the controller cannot know it succeeded: it retries (a 404 is success), and the policy
    reports the unresolved reference, never Ready."""
    proxy, start = proxied
    target = cluster.target_namespace()
    cluster.put("sriovnetworks", network("rail-a-net", target))
    policy = cluster.put(POLICIES, rail_policy("p", "ens1f0", "rail-a-net", cluster.ns))
    start()
    applied(cluster, "p")
    rule = proxy.add_rule(faults.response_lost(), verb="delete", resource="deviceattributes", times=1)
    cluster.objs.delete_namespaced_custom_object(
        "sriovnetwork.openshift.io", "v1", cluster.ns, "sriovnetworks", "rail-a-net"
    )
    cond = cluster.wait_condition(POLICIES, "p", DRA, "SriovNetworkNotFound", timeout=40)
    assert cond["status"] == "False"
    wait_for(
        lambda: rule.fired == 1 and not cluster.generated("deviceattributes"), 20, what="the invalidation"
    )
    # the policy keeps its filter and UID selector: its devices become unavailable, not broader
    (node,) = cluster.nodes
    (config,) = cluster.generated("sriovresourcepolicies")[node]["spec"]["configs"]
    assert config["deviceAttributesSelector"]["matchLabels"][UID_LABEL] == policy["metadata"]["uid"]
    assert config["resourceFilters"] and config["resourceFilters"][0]["pfNames"] == ["ens1f0"]
