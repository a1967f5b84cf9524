"""A SriovNetwork's source NAD follows upstream's rules (name/namespace, annotations, config key order)."""

from __future__ import annotations

import json

import pytest

from sriov_operator.core.sourcenad import (
    config_matches,
    desired_config,
    desired_nad,
    namespace_problem,
    owner_marker,
    resource_name_annotation,
    target_of,
)
from sriov_operator.reasons import NAD_INVALID, OperatorError
from tests.unit.sriov_operator.core.conftest import IPAM_A, OPS, network


def test_the_spec_14_3_network_renders_to_ai_workloads_with_whitespace_stripped_ipam() -> None:
    net = network(networkNamespace="ai-workloads", ipam=IPAM_A)
    nad = desired_nad(net, "openshift.io")
    assert nad["metadata"]["namespace"] == "ai-workloads" and nad["metadata"]["name"] == "rail-a-net"
    assert nad["metadata"]["annotations"] == {
        "k8s.v1.cni.cncf.io/resourceName": "openshift.io/sriov_vfs",
        "sriovnetwork.openshift.io/owner-ref": f"SriovNetwork.sriovnetwork.openshift.io/{OPS}/rail-a-net",
    }
    # Cross-namespace: no ownerReference (it could not resolve).
    assert "ownerReferences" not in nad["metadata"]
    config = nad["spec"]["config"]
    assert list(json.loads(config)) == ["cniVersion", "name", "type", "vlan", "vlanQoS", "logLevel", "ipam"]
    assert json.loads(config)["ipam"]["network_name"] == "ai-workloads-rail-a"
    assert config.startswith('{\n    "cniVersion": "1.0.0",\n    "name": "rail-a-net",')


def test_every_optional_field_in_upstream_order() -> None:
    net = network(
        "n",
        "apps",
        vlan=100,
        spoofChk="on",
        trust="off",
        vlanQoS=3,
        vlanProto="802.1ad",
        minTxRate=0,
        maxTxRate=1000,
        capabilities='{"mac": true}',
        linkState="enable",
        logFile="/var/log/s.log",
        ipam='{"type": "host-local", "note": "a b"}',
    )
    parsed = json.loads(desired_config(net))
    assert list(parsed) == [
        "cniVersion", "name", "type", "vlan", "spoofchk", "trust", "vlanQoS", "vlanProto",
        "min_tx_rate", "max_tx_rate", "capabilities", "link_state", "logLevel", "logFile", "ipam",
    ]  # fmt: skip
    # Upstream's quirk, kept so upstream-rendered NADs compare equal: spaces inside strings go too.
    assert parsed["ipam"] == {"type": "host-local", "note": "ab"}
    assert parsed["vlan"] == 100 and parsed["min_tx_rate"] == 0


def test_unset_and_invalid_switches_are_omitted_and_empty_ipam_is_an_object() -> None:
    parsed = json.loads(desired_config(network("n", spoofChk="maybe", minTxRate=-1, logLevel="")))
    assert "spoofchk" not in parsed and "min_tx_rate" not in parsed and "logLevel" not in parsed
    assert parsed["ipam"] == {} and parsed["vlan"] == 0 and parsed["vlanQoS"] == 0


def test_meta_plugins_make_a_conflist_with_sriov_first() -> None:
    parsed = json.loads(desired_config(network("n", metaPlugins='{"type": "tuning", "mtu": 9000}')))
    assert list(parsed) == ["cniVersion", "name", "plugins"]
    assert [p["type"] for p in parsed["plugins"]] == ["sriov", "tuning"]


def test_text_that_is_not_json_is_refused_naming_the_fields() -> None:
    with pytest.raises(OperatorError) as caught:
        desired_config(network("n", ipam="{not json"))
    assert caught.value.reason == NAD_INVALID and "spec.ipam" in caught.value.message


def test_same_namespace_nads_get_an_owner_reference_to_the_network() -> None:
    nad = desired_nad(network("n", "apps", uid="u1"), "")
    assert nad["metadata"]["ownerReferences"] == [
        {"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork", "name": "n", "uid": "u1"}
    ]
    assert nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "sriov_vfs"


def test_target_marker_and_namespace_rule() -> None:
    assert target_of(network("n", "apps")) == ("apps", "n")
    assert target_of(network("n", OPS, networkNamespace="x")) == ("x", "n")
    assert owner_marker(network("n", "apps")) == "SriovNetwork.sriovnetwork.openshift.io/apps/n"
    assert namespace_problem(network("n", OPS, networkNamespace="x"), OPS) is None
    assert namespace_problem(network("n", "apps"), OPS) is None
    problem = namespace_problem(network("n", "apps", networkNamespace="x"), OPS)
    assert problem and "not in the operator namespace (sriov-network-operator)" in problem
    assert resource_name_annotation(network("n"), "p") == "p/sriov_vfs"


def test_config_comparison_ignores_formatting_only() -> None:
    expected = desired_config(network("n"))
    assert config_matches({"spec": {"config": json.dumps(json.loads(expected))}}, expected)
    assert not config_matches({"spec": {"config": expected.replace('"vlan": 0', '"vlan": 1')}}, expected)
    assert not config_matches({"spec": {"config": "{broken"}}, expected)
    assert not config_matches({}, expected)
