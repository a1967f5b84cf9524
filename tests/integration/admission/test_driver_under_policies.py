"""The real `sriov-dra-driver` with deploy/base/admission/ installed and its DaemonSet-like token (bound
to a Pod on the bed's node): prepare, repair and release still work, and both layers of issue 31
item 3 show: the policy refuses a tenant's edit of a shadow, and with the policy unbound, repair
puts the edited config back and the Pod's release still removes everything."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed.access import delete_objects
from testbed.admission import denial, impersonating, install_policies, policy_objects, remove_policies
from testbed.apiobjects import as_object
from testbed.bed import TestBed
from testbed.claims import allocated_claim, custom_objects
from testbed.managed_driver import put_nad, shadows, sriov_config, start_agent
from testbed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.usefixtures("released_workloads")]

TENANT = "tenant-b@example.com"
NAD = ("k8s.cni.cncf.io", "v1")
NADS = "network-attachment-definitions"
JSON_PATCH = "application/json-patch+json"
SHADOW_POLICY = "auto-sriov-managed-shadows"


@pytest.fixture
def installed(testbed: TestBed, k8s_namespace: str) -> Iterator[None]:
    install_policies(testbed, k8s_namespace)
    try:
        yield
    finally:
        remove_policies(testbed, k8s_namespace)


def test_prepare_repair_and_release_under_the_policies(
    managed_agent, testbed, k8s_namespace, policies, classes, node_bound_kubeconfig, installed
) -> None:
    ns = k8s_namespace
    testbed.grant(
        TENANT, [{"apiGroups": ["k8s.cni.cncf.io"], "resources": [NADS], "verbs": ["*"]}], namespace=ns
    )
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    managed_agent.env["REPAIR_INTERVAL"] = "1"
    managed_agent.env["KUBECONFIG"] = str(node_bound_kubeconfig)
    start_agent(managed_agent, policies)
    claim = allocated_claim(testbed, ns, classes.name_only, "c")
    out = managed_agent.prepare(claim)
    assert out.error == "", out.error
    (shadow,) = shadows(testbed, ns)
    name, frozen = shadow["metadata"]["name"], shadow["spec"]["config"]
    edit = [{"op": "replace", "path": "/spec/config", "value": '{"type":"sriov","deviceID":"0000:00:00.0"}'}]

    # first layer: the tenant's edit is refused by the named policy
    tenant = impersonating(testbed, TENANT)
    try:
        with pytest.raises(ApiException) as caught:
            client.CustomObjectsApi(tenant).patch_namespaced_custom_object(
                *NAD, ns, NADS, name, edit, _content_type=JSON_PATCH
            )
    finally:
        tenant.close()
    found = denial(caught.value)
    assert found is not None and (found.policy, found.rule) == (SHADOW_POLICY, "shadow-content"), (
        caught.value.body
    )

    # second layer: with that policy unbound the edit lands, and repair puts the frozen bytes back
    (binding,) = [
        o
        for o in policy_objects()
        if o["kind"] == "ValidatingAdmissionPolicyBinding" and o["metadata"]["name"] == SHADOW_POLICY
    ]
    delete_objects(testbed.api_client, [binding])
    wait_for(
        lambda: _edit_lands(testbed, ns, name, edit), 30, what="the unbound policy to let the edit through"
    )
    wait_for(
        lambda: _config(testbed, ns, name) == frozen, 30, what="repair to restore the shadow's frozen config"
    )

    # an edited shadow no longer keeps its Pod Terminating: edit again, then release
    _edit_lands(testbed, ns, name, edit)
    assert managed_agent.unprepare(claim) == ""
    wait_for(lambda: shadows(testbed, ns) == [], 30, what="the released shadow to disappear")
    assert managed_agent.records() == {}
    testbed.apply([binding])


def _config(testbed: TestBed, ns: str, name: str) -> str:
    obj = as_object(custom_objects(testbed).get_namespaced_custom_object(*NAD, ns, NADS, name))
    return str(obj["spec"]["config"])


def _edit_lands(testbed: TestBed, ns: str, name: str, edit: list[dict[str, str]]) -> bool:
    try:
        custom_objects(testbed).patch_namespaced_custom_object(
            *NAD, ns, NADS, name, edit, _content_type=JSON_PATCH
        )
    except ApiException as exc:
        if denial(exc) is None:
            raise
        return False
    return True
