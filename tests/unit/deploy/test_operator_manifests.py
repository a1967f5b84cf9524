"""Static checks of deploy/operator/: the overlay ships every file, grants the operator exactly the
calls it makes, points the driver at the operator namespace and gives it no operator API."""

from __future__ import annotations

from typing import Any

import yaml

from tests.support.deploy import (
    DEPLOY_DIR,
    DRIVER_NAMESPACE,
    DRIVER_SA,
    NODE_STATE_NEEDS,
    NODE_STATE_SA,
    OPERATOR_DIR,
    OPERATOR_NAMESPACE,
    OPERATOR_NEEDS,
    OPERATOR_SA,
    deploy_objects,
    operator_objects,
)
from tests.unit.deploy.test_manifests import granted


def kustomization() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((OPERATOR_DIR / "kustomization.yaml").read_text())
    return loaded


def test_the_overlay_lists_every_file_and_includes_the_base() -> None:
    listed = kustomization()["resources"]
    assert listed[0] == "../"
    on_disk = {p.name for p in OPERATOR_DIR.glob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(listed[1:]) == on_disk


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
