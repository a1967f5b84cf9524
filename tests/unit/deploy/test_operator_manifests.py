"""Static checks of deploy/operator/: the overlay ships every file, grants the operator exactly the
calls it makes, points the driver at the operator namespace and gives it no operator API."""

from __future__ import annotations

from typing import Any

import yaml

from testbed.deployment import (
    DEPLOY_DIR,
    DRIVER_NAMESPACE,
    DRIVER_SA,
    NODE_STATE_SA,
    OPERATOR_DIR,
    OPERATOR_NAMESPACE,
    OPERATOR_SA,
)
from tests.support.deploy import NODE_STATE_NEEDS, OPERATOR_NEEDS, deploy_objects, operator_objects
from tests.unit.deploy.test_manifests import granted


def kustomization() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((OPERATOR_DIR / "kustomization.yaml").read_text())
    return loaded


def test_the_overlay_lists_every_file_and_includes_the_base() -> None:
    listed = kustomization()["resources"]
    assert listed[0] == "../base"
    on_disk = {
        str(p.relative_to(OPERATOR_DIR))
        for p in OPERATOR_DIR.rglob("*.yaml")
        if p.name != "kustomization.yaml"
    }
    assert set(listed[1:]) == on_disk
    # CRDs before the objects that use them, so that a plain apply of the list in order works
    crds = [name for name in listed[1:] if name.startswith("crds/")]
    assert listed[1 : 1 + len(crds)] == crds


OPERATOR_GROUP = "sriovnetwork.openshift.io"


def test_the_operator_api_ships_only_with_the_operator_overlay() -> None:
    """A driver-only install (deploy/) must not carry the operator's CRDs: on a cluster running an
    upstream sriov-network-operator it would replace that operator's CRDs with our minimal
    schemas, pruning every field we do not model (spec 12.4: legacy behaviour unchanged)."""
    base = {o["spec"]["group"] for o in deploy_objects() if o["kind"] == "CustomResourceDefinition"}
    assert OPERATOR_GROUP not in base
    overlay = {
        o["spec"]["names"]["kind"]
        for o in operator_objects()
        if o["kind"] == "CustomResourceDefinition" and o["spec"]["group"] == OPERATOR_GROUP
    }
    assert overlay == {
        "SriovNetworkNodePolicy",
        "SriovNetwork",
        "SriovNetworkNodeState",
        "SriovOperatorConfig",
    }


def test_the_operator_is_granted_exactly_what_it_uses() -> None:
    assert granted(operator_objects(), OPERATOR_NAMESPACE, OPERATOR_SA) == OPERATOR_NEEDS


def test_the_node_state_reporter_may_write_node_states_only() -> None:
    assert granted(operator_objects(), OPERATOR_NAMESPACE, NODE_STATE_SA) == NODE_STATE_NEEDS
    (daemonset,) = [o for o in operator_objects() if o["kind"] == "DaemonSet"]
    spec = daemonset["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == NODE_STATE_SA
    assert spec["containers"][0]["command"] == ["sriov-operator", "node-state"]


def test_the_driver_reads_policies_in_the_operator_namespace_and_no_operator_api() -> None:
    everything = deploy_objects() + operator_objects()
    driver = granted(everything, DRIVER_NAMESPACE, DRIVER_SA)
    assert {(p.verb, p.resource) for p in driver if p.namespace == OPERATOR_NAMESPACE} == {
        (v, r) for v in ("get", "list", "watch") for r in ("sriovresourcepolicies", "deviceattributes")
    }
    assert not [p for p in driver if p.group == "sriovnetwork.openshift.io"]


def test_the_driver_patch_sets_its_policy_namespace_to_the_operator_namespace() -> None:
    (patch,) = kustomization()["patches"]
    ops = yaml.safe_load(patch["patch"])
    assert ops[0] == {
        "op": "test",
        "path": "/spec/template/spec/containers/0/env/1/name",
        "value": "NAMESPACE",
    }
    assert ops[1]["value"] == {"name": "NAMESPACE", "value": OPERATOR_NAMESPACE}
    daemonset = next(
        o
        for o in deploy_objects()
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "sriov-dra-driver"
    )
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["env"][1]["name"] == "NAMESPACE"


def test_the_deployment_runs_the_operator_as_its_service_account() -> None:
    (deployment,) = [o for o in operator_objects() if o["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == OPERATOR_SA
    assert spec["containers"][0]["command"] == ["sriov-operator"]
    assert (DEPLOY_DIR / "operator") == OPERATOR_DIR
