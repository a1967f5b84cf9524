"""The real API server's verdict on the operator CRDs (spec 12.2.1, 12.2.2, 17.4).

Admission is server-side apply with dryRun=All and strict field validation (what kubectl sends):
schema, pruning, CEL compilation and evaluation all count. Round trips create real objects and
read them back, so a pruned field or a lost typed zero/false value shows as a difference.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.deploy import DeployCluster, operator_objects

pytestmark = pytest.mark.integration

GROUP, VERSION = "sriovnetwork.openshift.io", "v1"
REF_NAME = "sriovnetwork.openshift.io/sriovNetworkName"
REF_NS = "sriovnetwork.openshift.io/sriovNetworkNamespace"


def policy(name: str, namespace: str, attributes: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceName": "sriov_vfs",
        "nodeSelector": {"networking.example.com/dual-rail": "true"},
        "priority": 99,
        "numVfs": 16,
        "nicSelector": {"vendor": "15b3", "pfNames": ["ens1f0"]},
        "deviceType": "netdevice",
        "linkType": "eth",
    }
    if attributes is not None:
        spec["dra"] = {"attributes": attributes}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def rejected(cluster: DeployCluster, obj: dict[str, Any], validation: str = "Strict") -> str:
    """The server's refusal of a dry-run create of ``obj`` (its message); fails the test
    when it is accepted. A create, as `kubectl create`/`apply` sends it: server-side apply answers
    an undeclared member of an atomic map with HTTP 500 instead of a field error."""
    meta = obj["metadata"]
    with pytest.raises(ApiException) as caught:
        client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
            GROUP,
            VERSION,
            meta["namespace"],
            "sriovnetworknodepolicies",
            obj,
            dry_run="All",
            field_validation=validation,
        )
    # 400: strict decoding found an unknown field; 422: schema or CEL validation refused it.
    assert caught.value.status in (400, 422), caught.value.body
    return str(json.loads(caught.value.body or "{}").get("message"))


@pytest.fixture
def custom(deploy_cluster: DeployCluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(deploy_cluster.api)


def test_typed_zero_and_false_and_a_64_character_string_are_stored_unchanged(
    deploy_cluster, custom, k8s_namespace
) -> None:
    attrs = {
        "example.com/zero": {"int": 0},
        "example.com/off": {"bool": False},
        "example.com/empty": {"string": ""},
        "example.com/long": {"string": "x" * 64},
        "example.com/ver": {"version": "1.2.3-rc.1+build.5"},
        REF_NAME: {"string": "rail-a-net"},
        REF_NS: {"string": "sriov-network-operator"},
    }
    body = policy("typed-values", k8s_namespace, attrs)
    custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "sriovnetworknodepolicies", body)
    stored = custom.get_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, "sriovnetworknodepolicies", "typed-values"
    )
    assert stored["spec"]["dra"] == {"attributes": attrs}


def test_empty_dra_block_is_kept_and_null_dra_is_pruned_to_absent(custom, k8s_namespace) -> None:
    empty = policy("empty-dra", k8s_namespace, None)
    empty["spec"]["dra"] = {}
    null = policy("null-dra", k8s_namespace, None)
    null["spec"]["dra"] = None
    for body in (empty, null):
        custom.create_namespaced_custom_object(
            GROUP, VERSION, k8s_namespace, "sriovnetworknodepolicies", body
        )
    read = {
        name: custom.get_namespaced_custom_object(
            GROUP, VERSION, k8s_namespace, "sriovnetworknodepolicies", name
        )["spec"]
        for name in ("empty-dra", "null-dra")
    }
    # nil vs empty is the legacy/per-policy switch (spec 12.2.1): both must survive as written.
    assert read["empty-dra"]["dra"] == {}
    assert "dra" not in read["null-dra"]


def test_status_conditions_survive_a_status_write(custom, k8s_namespace) -> None:
    body = policy("with-status", k8s_namespace, {})
    created = custom.create_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, "sriovnetworknodepolicies", body
    )
    condition = {
        "type": "DRAConfigurationReady",
        "status": "False",
        "reason": "DRAInactive",
        "message": "the DRA provider is disabled",
        "observedGeneration": created["metadata"]["generation"],
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        k8s_namespace,
        "sriovnetworknodepolicies",
        "with-status",
        {"status": {"conditions": [condition]}},
    )
    stored = custom.get_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, "sriovnetworknodepolicies", "with-status"
    )
    assert stored["status"]["conditions"] == [condition]


@pytest.mark.parametrize(
    ("attributes", "complaint"),
    [
        ({"example.com/none": {}}, "should have at least 1 properties"),
        ({"example.com/two": {"int": 0, "bool": False}}, "must have at most 1 item"),
        (
            {"example.com/list": {"strings": ["a"]}},
            'strict decoding error: unknown field "spec.dra.attributes.example.com/list.strings"',
        ),
        ({"example.com/frac": {"int": 1.5}}, "must be of type integer"),
        ({"example.com/null": {"int": None}}, "should have at least 1 properties"),
        ({"example.com/long": {"string": "x" * 65}}, "may not be more than 64"),
        ({"example.com/ver": {"version": "x" * 65}}, "may not be more than 64"),
        ({"example.com/ver": {"version": "1.2"}}, "semantic version 2.0.0"),
        ({"example.com/ver": {"version": "01.2.3"}}, "semantic version 2.0.0"),
        ({"unqualified": {"int": 1}}, "DNS subdomain of at most 63"),
        ({"Example.com/upper": {"int": 1}}, "DNS subdomain of at most 63"),
        ({"example.com/9starts_with_digit": {"int": 1}}, "DNS subdomain of at most 63"),
        ({"example.com/" + "a" * 33: {"int": 1}}, "DNS subdomain of at most 63"),
        ({"a" * 64 + "/x": {"int": 1}}, "DNS subdomain of at most 63"),
        ({"sriovnetwork.k8snetworkplumbingwg.io/pciAddress": {"string": "x"}}, "discovery-owned key"),
        ({"resource.kubernetes.io/pcieRoot": {"string": "x"}}, "discovery-owned key"),
        ({"k8s.cni.cncf.io/resourceName": {"string": "x"}}, "discovery-owned key"),
        ({"sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName": {"string": "x"}}, "discovery-owned key"),
        (
            {"sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace": {"string": "x"}},
            "discovery-owned key",
        ),
        ({REF_NAME: {"string": "rail-a-net"}}, "or neither"),
        ({REF_NS: {"string": "ns"}}, "or neither"),
        ({REF_NAME: {"int": 1}, REF_NS: {"string": "ns"}}, "SriovNetwork name"),
        ({REF_NAME: {"string": "Rail_A"}, REF_NS: {"string": "ns"}}, "SriovNetwork name"),
        ({REF_NAME: {"string": "a"}, REF_NS: {"string": "a.b"}}, "namespace name"),
        ({f"example.com/k{i}": {"int": i} for i in range(33)}, "must have at most 32 items"),
    ],
    ids=lambda v: "" if isinstance(v, dict) else v[:30],
)
def test_admission_rejects_each_invalid_attribute_map(deploy_cluster, attributes, complaint) -> None:
    message = rejected(deploy_cluster, policy("bad", "ai-workloads", attributes))
    assert complaint in message, message


def test_without_strict_validation_a_list_member_is_pruned_and_then_fails_the_union(deploy_cluster) -> None:
    """kubectl defaults to Strict; a client that sends Ignore gets the unknown member pruned before
    validation, so a list value alone still fails (documented in deploy/base/crds)."""
    body = policy("bad", "ai-workloads", {"example.com/list": {"strings": ["a"]}})
    assert "should have at least 1 properties" in rejected(deploy_cluster, body, validation="Ignore")


def test_admission_accepts_the_boundaries(deploy_cluster) -> None:
    attrs: dict[str, Any] = {f"example.com/k{i}": {"int": i} for i in range(30)}
    attrs["a" * 63 + "/" + "b" * 32] = {"version": "1.0.0"}
    attrs["example.com/_under"] = {"string": "y" * 64}
    deploy_cluster.dry_run(policy("edges", "ai-workloads", attrs))


def test_the_default_policy_refuses_a_dra_block_but_not_its_absence(deploy_cluster) -> None:
    assert "default bootstrap policy" in rejected(deploy_cluster, policy("default", "ai-workloads", {}))
    deploy_cluster.dry_run(policy("default", "ai-workloads", None))


def test_nic_selector_needs_one_field(deploy_cluster) -> None:
    body = policy("no-selector", "ai-workloads", {})
    body["spec"]["nicSelector"] = {}
    assert "set at least one of vendor" in rejected(deploy_cluster, body)


def test_sriov_network_keeps_every_upstream_field_and_defaults_log_level(custom, k8s_namespace) -> None:
    spec = {
        "resourceName": "sriov_vfs",
        "networkNamespace": "ai-workloads",
        "ipam": '{"type": "host-local"}',
        "vlan": 0,
        "vlanQoS": 0,
        "vlanProto": "802.1Q",
        "spoofChk": "off",
        "trust": "on",
        "linkState": "auto",
        "minTxRate": 0,
        "maxTxRate": 100,
        "capabilities": '{"mac": true}',
        "metaPlugins": '{"type": "tuning"}',
        "logFile": "/tmp/sriov.log",
    }
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SriovNetwork",
        "metadata": {"name": "every-field", "namespace": k8s_namespace},
        "spec": copy.deepcopy(spec),
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "sriovnetworks", body)
    stored = custom.get_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, "sriovnetworks", "every-field"
    )
    assert stored["spec"] == {**spec, "logLevel": "info"}


def test_node_state_inventory_and_operator_config_round_trip(custom, k8s_namespace) -> None:
    state = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SriovNetworkNodeState",
        "metadata": {"name": "node-a", "namespace": k8s_namespace},
        "spec": {},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "sriovnetworknodestates", state)
    interfaces = [
        {
            "name": "ens1f0",
            "altNames": ["enp3s0f0np0"],
            "pciAddress": "0000:03:00.0",
            "vendor": "15b3",
            "deviceID": "1017",
            "linkType": "ETH",
            "numVfs": 1,
            "totalvfs": 8,
            "Vfs": [{"pciAddress": "0000:03:00.2", "vfID": 0, "deviceID": "1018", "driver": "mlx5_core"}],
        }
    ]
    custom.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        k8s_namespace,
        "sriovnetworknodestates",
        "node-a",
        {"status": {"interfaces": interfaces}},
    )
    got = custom.get_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, "sriovnetworknodestates", "node-a"
    )
    assert got["status"]["interfaces"] == interfaces
    config = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SriovOperatorConfig",
        "metadata": {"name": "default", "namespace": k8s_namespace},
        "spec": {"featureGates": {"dynamicResourceAllocation": False}},
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, k8s_namespace, "sriovoperatorconfigs", config)
    got = custom.get_namespaced_custom_object(
        GROUP, VERSION, k8s_namespace, "sriovoperatorconfigs", "default"
    )
    assert got["spec"]["featureGates"] == {"dynamicResourceAllocation": False}


def test_the_operator_manifests_pass_server_side_dry_run(deploy_cluster) -> None:
    failures = []
    for obj in operator_objects():
        try:
            deploy_cluster.dry_run(obj)
        except ApiException as exc:
            failures.append(f"{obj['kind']} {obj['metadata']['name']}: HTTP {exc.status}: {exc.body}")
    assert failures == []
