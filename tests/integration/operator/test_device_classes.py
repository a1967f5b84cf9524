"""The extended-resource DeviceClasses (spec 12.2.4's compatibility path) on the real API server,
written by the operator under its shipped RBAC: the class survives admission with its
extendedResourceName and CEL selector (DRAExtendedResource is beta and on in v1.36), follows the
policies' resourceNames, and a class of the same name that is not ours is never touched."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from testbed.waiting import wait_for
from tests.integration.operator.conftest import DUAL_RAIL, INTERFACES, rail_policy

pytestmark = pytest.mark.integration

DRA = "DRAConfigurationReady"
DC = ("resource.k8s.io", "v1", "deviceclasses")


def device_class(cluster, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = cluster.objs.get_cluster_custom_object(*DC, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return found


def test_a_class_per_resource_name_follows_the_policies(cluster, start_operator) -> None:
    cluster.operator_config(dra=True)
    cluster.node_state(cluster.add_node(DUAL_RAIL), INTERFACES)
    cluster.put("sriovnetworknodepolicies", rail_policy("a", "ens1f0", None, cluster.ns))
    start_operator()
    cluster.wait_condition("sriovnetworknodepolicies", "a", DRA, "DRAConfigurationApplied")
    stored = device_class(cluster, "sriov-vfs")
    assert stored is not None
    assert stored["spec"]["extendedResourceName"] == "openshift.io/sriov_vfs"
    assert "openshift.io/sriov_vfs" in stored["spec"]["selectors"][0]["cel"]["expression"]
    assert stored["metadata"]["labels"]["sriovnetwork.openshift.io/resource-name"] == "sriov_vfs"
    # the last policy of that resourceName gone: the class goes too
    cluster.objs.delete_namespaced_custom_object(
        "sriovnetwork.openshift.io", "v1", cluster.ns, "sriovnetworknodepolicies", "a"
    )
    wait_for(lambda: device_class(cluster, "sriov-vfs") is None, 20, what="the class removed")


def test_a_class_of_the_same_name_that_is_not_ours_is_left_alone(cluster, start_operator) -> None:
    foreign = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "sriov-vfs"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "example.com"'}}]},
    }
    cluster.objs.create_cluster_custom_object(*DC, foreign)
    try:
        cluster.operator_config(dra=True)
        cluster.node_state(cluster.add_node(DUAL_RAIL), INTERFACES)
        cluster.put("sriovnetworknodepolicies", rail_policy("a", "ens1f0", None, cluster.ns))
        op = start_operator()
        # the policy's own mapping is not held back by the compatibility class
        cluster.wait_condition("sriovnetworknodepolicies", "a", DRA, "DRAConfigurationApplied")
        wait_for(
            lambda: "DeviceClass sriov-vfs exists and is not generated" in op.output(), 20, what="the warning"
        )
        stored = device_class(cluster, "sriov-vfs")
        assert stored is not None and stored["spec"] == foreign["spec"]
        assert not (stored["metadata"].get("labels") or {})
    finally:
        cluster.objs.delete_cluster_custom_object(*DC, "sriov-vfs")
