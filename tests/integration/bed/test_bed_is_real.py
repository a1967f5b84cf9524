"""The test bed is a real Kubernetes control plane, not a mock: each test checks a behaviour mocks
get wrong (issue 2): patch and concurrency status codes, garbage collection held by finalizers,
CEL validation, RBAC, and the controller-manager and scheduler actually acting."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed.bed import TestBed
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NAD_GROUP, NAD_VERSION, NAD_PLURAL = "k8s.cni.cncf.io", "v1", "network-attachment-definitions"
JSON_PATCH = "application/json-patch+json"
KCM_USER = "system:kube-controller-manager"


def nad_body(name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{NAD_GROUP}/{NAD_VERSION}",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, **metadata},
        "spec": {"config": json.dumps({"cniVersion": "1.0.0", "name": name, "type": "sriov"})},
    }


def create_nad(api: client.ApiClient, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    return cast(
        dict[str, Any],
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            NAD_GROUP, NAD_VERSION, ns, NAD_PLURAL, body
        ),
    )


def get_nad(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return cast(
        dict[str, Any],
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            NAD_GROUP, NAD_VERSION, ns, NAD_PLURAL, name
        ),
    )


def create_pod(api: client.ApiClient, ns: str, name: str, **spec: Any) -> client.V1Pod:
    body = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/none:0"}], **spec},
    }
    return client.CoreV1Api(api).create_namespaced_pod(ns, client.V1Pod.model_validate(body))


def test_json_patch_with_failing_test_op_is_422(testbed: TestBed, k8s_namespace: str) -> None:
    api = testbed.api_client
    objs = client.CustomObjectsApi(api)
    create_nad(api, k8s_namespace, nad_body("net1"))
    failing = [
        {"op": "test", "path": "/spec/config", "value": "not the config"},
        {"op": "replace", "path": "/spec/config", "value": "{}"},
    ]
    with pytest.raises(ApiException) as err:
        objs.patch_namespaced_custom_object(
            NAD_GROUP, NAD_VERSION, k8s_namespace, NAD_PLURAL, "net1", failing, _content_type=JSON_PATCH
        )
    assert err.value.status == 422
    assert get_nad(api, k8s_namespace, "net1")["spec"]["config"] != "{}"

    current = get_nad(api, k8s_namespace, "net1")["spec"]["config"]
    passing = [{"op": "test", "path": "/spec/config", "value": current}, failing[1]]
    objs.patch_namespaced_custom_object(
        NAD_GROUP, NAD_VERSION, k8s_namespace, NAD_PLURAL, "net1", passing, _content_type=JSON_PATCH
    )
    assert get_nad(api, k8s_namespace, "net1")["spec"]["config"] == "{}"


def test_update_with_stale_resource_version_is_409(testbed: TestBed, k8s_namespace: str) -> None:
    api = testbed.api_client
    objs = client.CustomObjectsApi(api)
    stale = create_nad(api, k8s_namespace, nad_body("net1"))
    fresh = dict(stale, metadata=dict(stale["metadata"], labels={"round": "1"}))
    objs.replace_namespaced_custom_object(NAD_GROUP, NAD_VERSION, k8s_namespace, NAD_PLURAL, "net1", fresh)

    stale["metadata"]["labels"] = {"round": "stale"}
    with pytest.raises(ApiException) as err:
        objs.replace_namespaced_custom_object(
            NAD_GROUP, NAD_VERSION, k8s_namespace, NAD_PLURAL, "net1", stale
        )
    assert err.value.status == 409
    assert get_nad(api, k8s_namespace, "net1")["metadata"]["labels"] == {"round": "1"}


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
def test_garbage_collector_deletes_owned_nad_but_finalizer_holds_it(
    testbed: TestBed, k8s_namespace: str, propagation: str
) -> None:
    api = testbed.api_client
    core = client.CoreV1Api(api)
    objs = client.CustomObjectsApi(api)
    pod = create_pod(api, k8s_namespace, "owner")
    assert pod.metadata is not None
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "owner",
        "uid": pod.metadata.uid,
        "blockOwnerDeletion": False,
    }
    finalizer = "auto-sriov.test/hold"
    create_nad(api, k8s_namespace, nad_body("shadow", finalizers=[finalizer], ownerReferences=[owner]))
    mark = testbed.audit.mark()

    core.delete_namespaced_pod("owner", k8s_namespace, grace_period_seconds=0, propagation_policy=propagation)
    deleting = wait_for(
        lambda: (
            n if (n := get_nad(api, k8s_namespace, "shadow"))["metadata"].get("deletionTimestamp") else None
        ),
        60.0,
        what="the garbage collector to delete the NAD owned by the deleted Pod",
    )
    assert deleting["metadata"]["finalizers"] == [finalizer]
    gc_deletes = testbed.audit.wait_for_count(
        1,
        since=mark,
        user=KCM_USER,
        verb="delete",
        resource=NAD_PLURAL,
        namespace=k8s_namespace,
        name="shadow",
    )
    assert gc_deletes[0].code == 200

    def gone(read: Callable[[], object]) -> bool:
        try:
            read()
        except ApiException as exc:
            return bool(exc.status == 404)
        return False

    # blockOwnerDeletion=false: even a foreground delete of the Pod does not wait for the held NAD.
    wait_for(
        lambda: gone(lambda: core.read_namespaced_pod("owner", k8s_namespace)), 60.0, what="the Pod to go"
    )
    assert get_nad(api, k8s_namespace, "shadow")["metadata"]["finalizers"] == [finalizer]

    objs.patch_namespaced_custom_object(
        NAD_GROUP,
        NAD_VERSION,
        k8s_namespace,
        NAD_PLURAL,
        "shadow",
        [{"op": "remove", "path": "/metadata/finalizers"}],
        _content_type=JSON_PATCH,
    )
    wait_for(
        lambda: gone(lambda: get_nad(api, k8s_namespace, "shadow")),
        30.0,
        what="the NAD to disappear once its finalizer is removed",
    )


def test_device_class_cel_selector_is_compiled_by_the_server(
    testbed: TestBed, request: pytest.FixtureRequest
) -> None:
    resource = client.ResourceV1Api(testbed.api_client)
    name = f"testbed-cel-{abs(hash(request.node.nodeid)) % 10**8}"

    def device_class(expression: str) -> client.V1DeviceClass:
        return client.V1DeviceClass.model_validate(
            {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}
        )

    with pytest.raises(ApiException) as err:
        resource.create_device_class(device_class('device.driver == "sriov.auto.example" &&'))
    assert err.value.status == 422
    assert "compil" in (err.value.body or "").lower()

    created = resource.create_device_class(device_class('device.driver == "sriov.auto.example"'))
    try:
        assert created.spec is not None and created.spec.selectors
        assert created.spec.selectors[0].cel is not None
        assert created.spec.selectors[0].cel.expression == 'device.driver == "sriov.auto.example"'
    finally:
        resource.delete_device_class(name)


def test_request_outside_a_narrow_cluster_role_is_forbidden(testbed: TestBed, k8s_namespace: str) -> None:
    # A user of its own: the shared "driver" identity collects the shipped driver role in other tests.
    user = f"narrow-{k8s_namespace}"
    testbed.issue_identity(user, user)
    testbed.grant(user, [{"apiGroups": [NAD_GROUP], "resources": [NAD_PLURAL], "verbs": ["get", "list"]}])
    create_nad(testbed.api_client, k8s_namespace, nad_body("net1"))
    mark = testbed.audit.mark()

    driver = testbed.client_for(user)
    try:
        listed = cast(
            dict[str, Any],
            client.CustomObjectsApi(driver).list_namespaced_custom_object(
                NAD_GROUP, NAD_VERSION, k8s_namespace, NAD_PLURAL
            ),
        )
        assert [i["metadata"]["name"] for i in listed["items"]] == ["net1"]
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(driver).list_namespaced_pod(k8s_namespace)
        assert err.value.status == 403
        with pytest.raises(ApiException) as err:
            client.CustomObjectsApi(driver).delete_namespaced_custom_object(
                NAD_GROUP, NAD_VERSION, k8s_namespace, NAD_PLURAL, "net1"
            )
        assert err.value.status == 403
    finally:
        driver.close()

    forbidden = testbed.audit.wait_for_count(2, since=mark, user=user, code=403)
    assert {(e.verb, e.resource) for e in forbidden} == {("list", "pods"), ("delete", NAD_PLURAL)}
    get_nad(testbed.api_client, k8s_namespace, "net1")


def test_controller_manager_creates_resource_claim_from_template(
    testbed: TestBed, k8s_namespace: str
) -> None:
    api = testbed.api_client
    resource = client.ResourceV1Api(api)
    template = client.V1ResourceClaimTemplate.model_validate(
        {
            "metadata": {"name": "vf-pair"},
            "spec": {
                "spec": {
                    "devices": {"requests": [{"name": "vf", "exactly": {"deviceClassName": "sriov-vf"}}]}
                }
            },
        }
    )
    resource.create_namespaced_resource_claim_template(k8s_namespace, template)
    mark = testbed.audit.mark()
    pod = create_pod(
        api,
        k8s_namespace,
        "consumer",
        resourceClaims=[{"name": "net", "resourceClaimTemplateName": "vf-pair"}],
        containers=[
            {"name": "main", "image": "registry.invalid/none:0", "resources": {"claims": [{"name": "net"}]}}
        ],
    )
    assert pod.metadata is not None

    def claim_for_pod() -> client.ResourceV1ResourceClaim | None:
        for claim in resource.list_namespaced_resource_claim(k8s_namespace).items:
            refs = (claim.metadata.owner_references if claim.metadata else None) or []
            if any(r.uid == pod.metadata.uid for r in refs if pod.metadata):
                return claim
        return None

    claim = wait_for(claim_for_pod, 60.0, what="the resourceclaim controller to create the Pod's claim")
    assert claim.metadata is not None and claim.spec is not None
    assert claim.metadata.annotations == {"resource.kubernetes.io/pod-claim-name": "net"}
    requests = claim.spec.devices.requests if claim.spec.devices else None
    assert requests and requests[0].exactly is not None
    assert requests[0].exactly.device_class_name == "sriov-vf"
    creates = testbed.audit.wait_for_count(
        1, since=mark, user=KCM_USER, verb="create", resource="resourceclaims"
    )
    assert creates[0].namespace == k8s_namespace

    def status_names_claim() -> bool:
        status = client.CoreV1Api(api).read_namespaced_pod("consumer", k8s_namespace).status
        statuses = (status.resource_claim_statuses if status else None) or []
        return any(
            s.name == "net" and s.resource_claim_name == claim.metadata.name
            for s in statuses
            if claim.metadata
        )

    wait_for(status_names_claim, 30.0, what="the Pod status to name its generated claim")


def test_scheduler_binds_a_pod_to_the_bed_node(testbed: TestBed, k8s_namespace: str) -> None:
    create_pod(testbed.api_client, k8s_namespace, "plain")
    core = client.CoreV1Api(testbed.api_client)

    def node_name() -> str | None:
        spec = core.read_namespaced_pod("plain", k8s_namespace).spec
        return spec.node_name if spec else None

    assert wait_for(node_name, 60.0, what="kube-scheduler to bind the Pod") == testbed.node_name
    node = core.read_node(testbed.node_name)
    assert node.metadata is not None and node.metadata.uid == testbed.node_uid
