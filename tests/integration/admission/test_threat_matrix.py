"""docs/threat-model.md's attacks on the real API server, with deploy/base/admission/'s policies installed.

Identities are the real ones: the driver's and the CNI's ServiceAccount tokens bound to a Pod on a
node (as a DaemonSet Pod's projected token is; one driver token from another node), a driver token
that names no node, and a tenant: a user bound to the built-in ``edit`` ClusterRole in one
namespace, plus NetworkAttachmentDefinition rights there (impersonated). Each attack must be
refused by the policy and rule the threat model names; each legitimate write must still pass.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract.binding import Binding, SourceRef
from sriov_contract.identity import config_sha256
from sriov_contract.keys import (
    BINDING_ANNOTATION,
    NETWORK_STATUS_ANNOTATION,
    NETWORKS_ANNOTATION,
    PROTECTION_FINALIZER,
    PROTOCOL_VERSION,
    REGISTRY_ANNOTATION,
    shadow_labels,
)
from testbed.admission import client_from, denial, impersonating, install_policies, remove_policies
from testbed.apiobjects import as_object, meta, present, uid_of
from testbed.bed import TestBed
from testbed.bound_token import BoundToken, node_bound_kubeconfig
from testbed.deployment import BASE_DIR, CNI_NAMESPACE, CNI_SA, DRIVER_NAMESPACE, DRIVER_SA, load_documents
from testbed.node_agent import DRIVER
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

NAD_API = ("k8s.cni.cncf.io", "v1")
NADS = "network-attachment-definitions"
JSON_PATCH = "application/json-patch+json"
TENANT = "tenant-a@example.com"
OPERATOR = "system:serviceaccount:sriov-network-operator:sriov-network-operator"
# Kubernetes' limit on one object's annotations, keys and values together.
ANNOTATIONS_LIMIT = 256 * 1024
HOSTILE_SECONDS = 5.0


@dataclass
class World:
    bed: TestBed
    ns: str
    other_node: str
    driver: client.ApiClient  # the driver's token from the bed's node
    driver_elsewhere: client.ApiClient  # the driver's token from the other node
    driver_nodeless: client.ApiClient  # a driver token that names no node
    cni: client.ApiClient  # the CNI's token from the bed's node
    tenant: client.ApiClient
    operator: client.ApiClient

    @property
    def admin(self) -> client.ApiClient:
        return self.bed.api_client


def _nodeless_kubeconfig(bed: TestBed, path: Path) -> Path:
    """A TokenRequest bound to nothing: the driver's identity without a node in its extra."""
    core = client.CoreV1Api(bed.api_client)
    request = client.AuthenticationV1TokenRequest.model_validate({"spec": {"expirationSeconds": 3600}})
    token = present(
        core.create_namespaced_service_account_token(DRIVER_SA, DRIVER_NAMESPACE, request).status, "token"
    ).token
    config = json.loads(bed.kubeconfig_for("admin").read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(json.dumps(config))
    return path


def _grant_tenant(bed: TestBed, ns: str) -> None:
    rbac = client.RbacAuthorizationV1Api(bed.api_client)
    rbac.create_namespaced_role_binding(
        ns,
        client.V1RoleBinding.model_validate(
            {
                "metadata": {"name": "tenant-edit"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": TENANT}],
            }
        ),
    )
    # Multus installs do not aggregate NADs into edit; a multi-tenant cluster grants them so.
    bed.grant(
        TENANT,
        [
            {"apiGroups": ["k8s.cni.cncf.io"], "resources": [NADS], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
        ],
        namespace=ns,
    )


@pytest.fixture(scope="module")
def world(testbed: TestBed, driver_crds: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    core = client.CoreV1Api(testbed.api_client)
    for ns in (DRIVER_NAMESPACE, CNI_NAMESPACE):
        testbed.create_namespace(ns, exist_ok=True)
    testbed.apply(load_documents(BASE_DIR / "driver-rbac.yaml") + load_documents(BASE_DIR / "cni-rbac.yaml"))
    other = f"policy-other-{secrets.token_hex(3)}"
    core.create_node(
        client.V1Node.model_validate(
            {
                "metadata": {"name": other},
                "spec": {"taints": [{"key": "auto-sriov/test", "effect": "NoSchedule"}]},
            }
        )
    )
    ns = testbed.create_namespace(f"tenant-{secrets.token_hex(3)}")
    _grant_tenant(testbed, ns)
    testbed.grant(
        OPERATOR,
        [
            {
                "apiGroups": ["k8s.cni.cncf.io"],
                "resources": [NADS],
                "verbs": ["get", "create", "update", "delete"],
            }
        ],
    )
    tmp = tmp_path_factory.mktemp("policy-tokens")
    tokens: list[BoundToken] = [
        node_bound_kubeconfig(testbed, DRIVER_NAMESPACE, DRIVER_SA, tmp / "driver.json"),
        node_bound_kubeconfig(
            testbed, DRIVER_NAMESPACE, DRIVER_SA, tmp / "driver-other.json", node_name=other
        ),
        node_bound_kubeconfig(testbed, CNI_NAMESPACE, CNI_SA, tmp / "cni.json"),
    ]
    clients = [client_from(t.kubeconfig) for t in tokens]
    clients.append(client_from(_nodeless_kubeconfig(testbed, tmp / "driver-nodeless.json")))
    clients += [impersonating(testbed, TENANT), impersonating(testbed, OPERATOR)]
    install_policies(testbed, ns)
    try:
        yield World(
            testbed, ns, other, clients[0], clients[1], clients[3], clients[2], clients[4], clients[5]
        )
    finally:
        remove_policies(testbed, ns)
        for c in clients:
            c.close()
        for t in tokens:
            t.revoke(testbed)
        core.delete_namespace(ns)
        core.delete_node(other)


# --- objects -------------------------------------------------------------------------------------


def make_pod(w: World, name: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod = client.CoreV1Api(w.admin).create_namespaced_pod(
        w.ns,
        client.V1Pod.model_validate(
            {
                "metadata": {
                    "name": name,
                    "annotations": {"example.com/made-by": "test", **(annotations or {})},
                },
                "spec": {
                    "nodeName": node,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "registry.invalid/none:0"}],
                },
            }
        ),
    )
    out: dict[str, Any] = w.admin.sanitize_for_serialization(pod)
    return out


def shadow_body(w: World, pod: dict[str, Any], node: str, *, finalizer: bool = True) -> dict[str, Any]:
    """A shadow as the driver writes it, for `pod`, bound to `node`."""
    config = json.dumps(
        {"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov", "deviceID": "0000:3b:02.0"}
    )
    claim_uid, node_uid = "0b6c6a2e-2f0e-4d3a-9c1e-5a4b3c2d1e0f", "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
    pod_uid = pod["metadata"]["uid"]
    attachment = hashlib.sha256(f"{pod_uid}/{node}".encode()).hexdigest()
    binding = Binding(
        PROTOCOL_VERSION,
        attachment,
        pod_uid,
        claim_uid,
        node,
        node_uid,
        SourceRef(w.ns, "rail-a", "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "1"),
        "0000:3b:02.0",
        "dra0",
        config_sha256(config.encode()),
    )
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": f"dra-sriov-{attachment[:20]}",
            "namespace": w.ns,
            "labels": shadow_labels(pod_uid, claim_uid, node_uid),
            "annotations": {BINDING_ANNOTATION: binding.to_json()},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod["metadata"]["name"],
                    "uid": pod_uid,
                    "blockOwnerDeletion": False,
                }
            ],
            "finalizers": [PROTECTION_FINALIZER] if finalizer else [],
        },
        "spec": {"config": config},
    }


def nads(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def create_nad(api: client.ApiClient, body: dict[str, Any]) -> dict[str, Any]:
    out = nads(api).create_namespaced_custom_object(*NAD_API, body["metadata"]["namespace"], NADS, body)
    return as_object(out)


def patch_nad(api: client.ApiClient, nad: dict[str, Any], ops: list[dict[str, Any]]) -> Any:
    meta = nad["metadata"]
    return nads(api).patch_namespaced_custom_object(
        *NAD_API, meta["namespace"], NADS, meta["name"], ops, _content_type=JSON_PATCH
    )


def delete_nad(api: client.ApiClient, nad: dict[str, Any]) -> Any:
    meta = nad["metadata"]
    return nads(api).delete_namespaced_custom_object(*NAD_API, meta["namespace"], NADS, meta["name"])


def get_nad(w: World, nad: dict[str, Any]) -> dict[str, Any] | None:
    meta = nad["metadata"]
    try:
        out = nads(w.admin).get_namespaced_custom_object(*NAD_API, meta["namespace"], NADS, meta["name"])
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return as_object(out)


def patch_pod(api: client.ApiClient, pod: dict[str, Any], ops: list[dict[str, Any]]) -> Any:
    meta = pod["metadata"]
    return client.CoreV1Api(api).patch_namespaced_pod(meta["name"], meta["namespace"], ops)


def annotate(key: str, value: str) -> list[dict[str, Any]]:
    return [
        {
            "op": "add",
            "path": "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1"),
            "value": value,
        }
    ]


def slice_body(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER.replace('.', '-')}-{secrets.token_hex(2)}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }


def refused(call: Callable[[], Any], policy: str, rule: str) -> str:
    """Run `call`, which `policy` must refuse by `rule`; returns the message."""
    with pytest.raises(ApiException) as caught:
        call()
    found = denial(caught.value)
    assert found is not None, caught.value.body
    assert (caught.value.status, found.policy, found.rule) == (403, policy, rule), found
    return found.message


def status_write(api: client.ApiClient, w: World, pod: dict[str, Any], **annotations: str) -> Any:
    """The CNI's network-status write: a read-modify-write PUT of pods/status."""
    core = client.CoreV1Api(api)
    name = pod["metadata"]["name"]
    live = core.read_namespaced_pod(name, w.ns)
    live_meta = meta(live)
    live_meta.annotations = {**(live_meta.annotations or {}), **annotations}
    return core.replace_namespaced_pod_status(name, w.ns, live)


# --- the driver's token from one node ----------------------------------------------------------


def test_driver_patches_only_its_own_nodes_pods_and_only_its_two_annotations(world: World) -> None:
    w = world
    here = make_pod(w, "here", w.bed.node_name)
    there = make_pod(w, "there", w.other_node)
    # legitimate: the networks selection and the registry on a Pod of its node
    patch_pod(w.driver, here, annotate(NETWORKS_ANNOTATION, "[]") + annotate(REGISTRY_ANNOTATION, "{}"))
    # attacks: a Pod of another node; labels, tolerations, a foreign annotation on its own node's
    refused(
        lambda: patch_pod(w.driver, there, annotate(NETWORKS_ANNOTATION, "[]")),
        "auto-sriov-driver-pods",
        "own-node",
    )
    refused(
        lambda: patch_pod(w.driver, here, [{"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}]),
        "auto-sriov-driver-pods",
        "owned-annotations",
    )
    toleration = {"key": "k", "operator": "Exists", "effect": "NoExecute"}
    refused(
        lambda: patch_pod(
            w.driver, here, [{"op": "add", "path": "/spec/tolerations", "value": [toleration]}]
        ),
        "auto-sriov-driver-pods",
        "owned-annotations",
    )
    refused(
        lambda: patch_pod(w.driver, here, annotate("example.com/x", "y")),
        "auto-sriov-driver-pods",
        "owned-annotations",
    )
    # a token that names no node writes nothing
    refused(
        lambda: patch_pod(w.driver_nodeless, here, annotate(NETWORKS_ANNOTATION, "[]")),
        "auto-sriov-driver-pods",
        "node-bound-token",
    )


def test_driver_writes_only_managed_shadows_bound_to_its_node(world: World) -> None:
    w = world
    pod = make_pod(w, "consumer", w.bed.node_name)
    source = create_nad(
        w.admin,
        {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "rail-a", "namespace": w.ns, "annotations": {"example.com/owner": "admin"}},
            "spec": {"config": json.dumps({"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov"})},
        },
    )
    # attacks: an unmanaged NAD, an administrator's source NAD, a shadow naming another node
    plain = {**source, "metadata": {"name": "mine", "namespace": w.ns}}
    refused(lambda: create_nad(w.driver, plain), "auto-sriov-driver-nads", "own-shadows")
    refused(
        lambda: patch_nad(w.driver, source, annotate("x.example.com/y", "z")),
        "auto-sriov-driver-nads",
        "own-shadows",
    )
    refused(lambda: delete_nad(w.driver, source), "auto-sriov-driver-nads", "own-shadows")
    refused(
        lambda: create_nad(w.driver, shadow_body(w, pod, w.other_node)),
        "auto-sriov-driver-nads",
        "own-shadows",
    )
    refused(
        lambda: create_nad(w.driver_nodeless, shadow_body(w, pod, w.bed.node_name)),
        "auto-sriov-driver-nads",
        "node-bound-token",
    )
    # the other node's driver made a shadow; this node's may not touch it
    theirs = create_nad(w.driver_elsewhere, shadow_body(w, make_pod(w, "far", w.other_node), w.other_node))
    refused(
        lambda: patch_nad(w.driver, theirs, [{"op": "remove", "path": "/metadata/finalizers"}]),
        "auto-sriov-driver-nads",
        "own-shadows",
    )
    refused(lambda: delete_nad(w.driver, theirs), "auto-sriov-driver-nads", "own-shadows")
    # a binding that names this node only inside another value is not a binding to this node
    forged = shadow_body(w, pod, w.other_node)
    forged["metadata"]["annotations"][BINDING_ANNOTATION] = forged["metadata"]["annotations"][
        BINDING_ANNOTATION
    ][:-1] + (',"x":"\\"nodeName\\":\\"' + w.bed.node_name + '\\""}')
    refused(lambda: create_nad(w.driver, forged), "auto-sriov-driver-nads", "own-shadows")
    # legitimate: create, drop the finalizer of and delete its own shadow
    mine = create_nad(w.driver, shadow_body(w, pod, w.bed.node_name))
    patch_nad(w.driver, mine, [{"op": "remove", "path": "/metadata/finalizers"}])
    delete_nad(w.driver, mine)
    assert wait_for(lambda: get_nad(w, mine) is None, 10, what="the shadow to go")


def test_driver_writes_only_its_own_nodes_resource_slices(world: World) -> None:
    w = world
    slices = client.CustomObjectsApi(w.driver)
    api = ("resource.k8s.io", "v1", "resourceslices")
    refused(
        lambda: slices.create_cluster_custom_object(*api, slice_body(w.other_node)),
        "auto-sriov-driver-resourceslices",
        "own-node",
    )
    theirs = client.CustomObjectsApi(w.driver_elsewhere).create_cluster_custom_object(
        *api, slice_body(w.other_node)
    )
    name = as_object(theirs)["metadata"]["name"]
    refused(
        lambda: slices.delete_cluster_custom_object(*api, name),
        "auto-sriov-driver-resourceslices",
        "own-node",
    )
    bump = [{"op": "replace", "path": "/spec/pool/generation", "value": 2}]
    refused(
        lambda: slices.patch_cluster_custom_object(*api, name, bump, _content_type=JSON_PATCH),
        "auto-sriov-driver-resourceslices",
        "own-node",
    )
    ours = as_object(slices.create_cluster_custom_object(*api, slice_body(w.bed.node_name)))
    refused(
        lambda: client.CustomObjectsApi(w.driver_nodeless).create_cluster_custom_object(
            *api, slice_body(w.bed.node_name)
        ),
        "auto-sriov-driver-resourceslices",
        "node-bound-token",
    )
    # legitimate: its own node's slice, updated and deleted
    slices.patch_cluster_custom_object(*api, ours["metadata"]["name"], bump, _content_type=JSON_PATCH)
    slices.delete_cluster_custom_object(*api, ours["metadata"]["name"])
    client.CustomObjectsApi(w.driver_elsewhere).delete_cluster_custom_object(*api, name)


# --- the CNI's token ---------------------------------------------------------------------------


def test_cni_writes_only_network_status_of_its_own_nodes_pods(world: World) -> None:
    w = world
    here = make_pod(w, "cni-here", w.bed.node_name)
    there = make_pod(w, "cni-there", w.other_node)
    status = json.dumps([{"name": "cbr0", "interface": "eth0", "default": True}])
    status_write(w.cni, w, here, **{NETWORK_STATUS_ANNOTATION: status})
    refused(
        lambda: status_write(w.cni, w, there, **{NETWORK_STATUS_ANNOTATION: status}),
        "auto-sriov-cni-pods",
        "own-node",
    )
    refused(
        lambda: status_write(w.cni, w, here, **{"example.com/x": "y"}),
        "auto-sriov-cni-pods",
        "network-status-only",
    )


# --- a tenant in its own namespace -------------------------------------------------------------


@pytest.fixture
def tenant_shadow(world: World) -> dict[str, Any]:
    pod = make_pod(world, f"workload-{secrets.token_hex(2)}", world.bed.node_name)
    return create_nad(world.driver, shadow_body(world, pod, world.bed.node_name))


@pytest.mark.parametrize(
    ("attack", "ops"),
    [
        (
            "config",
            [
                {
                    "op": "replace",
                    "path": "/spec/config",
                    "value": '{"type":"sriov","deviceID":"0000:3b:02.7"}',
                }
            ],
        ),
        (
            "label",
            [
                {
                    "op": "replace",
                    "path": "/metadata/labels/sriovnetwork.k8snetworkplumbingwg.io~1pod-uid",
                    "value": "x",
                }
            ],
        ),
        (
            "label-removed",
            [{"op": "remove", "path": "/metadata/labels/sriovnetwork.k8snetworkplumbingwg.io~1managed-by"}],
        ),
        (
            "binding",
            [
                {
                    "op": "replace",
                    "path": "/metadata/annotations/sriovnetwork.k8snetworkplumbingwg.io~1binding",
                    "value": "{}",
                }
            ],
        ),
        ("finalizer", [{"op": "remove", "path": "/metadata/finalizers"}]),
    ],
)
def test_a_tenant_cannot_change_what_the_driver_owns_on_a_shadow(
    world: World, tenant_shadow, attack, ops
) -> None:
    refused(
        lambda: patch_nad(world.tenant, tenant_shadow, ops), "auto-sriov-managed-shadows", "shadow-content"
    )
    assert (get_nad(world, tenant_shadow) or {}).get("spec") == tenant_shadow["spec"]


def test_a_tenant_cannot_delete_or_forge_a_shadow_but_may_label_it(world: World, tenant_shadow) -> None:
    w = world
    refused(lambda: delete_nad(w.tenant, tenant_shadow), "auto-sriov-managed-shadows", "shadow-delete")
    forged = {**tenant_shadow, "metadata": {**tenant_shadow["metadata"], "name": "dra-sriov-forged"}}
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
        forged["metadata"].pop(key, None)
    refused(lambda: create_nad(w.tenant, forged), "auto-sriov-managed-shadows", "forged-shadow")
    # an administrator is no exception (only unbinding the policy is)
    refused(lambda: create_nad(w.admin, forged), "auto-sriov-managed-shadows", "forged-shadow")
    # the policy is narrow: a label of the tenant's own is no business of the driver's
    patch_nad(w.tenant, tenant_shadow, [{"op": "add", "path": "/metadata/labels/team", "value": "a"}])


def test_a_tenant_cannot_change_a_pods_registry_or_managed_networks(world: World) -> None:
    w = world
    pod = make_pod(w, "managed", w.bed.node_name, {NETWORKS_ANNOTATION: "[]"})
    entries = json.dumps([{"name": "dra-sriov-0123456789abcdef0123", "interface": "dra0"}])
    patch_pod(
        w.driver, pod, annotate(NETWORKS_ANNOTATION, entries) + annotate(REGISTRY_ANNOTATION, '{"version":1}')
    )
    refused(
        lambda: patch_pod(w.tenant, pod, annotate(REGISTRY_ANNOTATION, "{}")),
        "auto-sriov-managed-pod-networks",
        "registry",
    )
    refused(
        lambda: patch_pod(
            w.tenant,
            pod,
            [
                {
                    "op": "remove",
                    "path": "/metadata/annotations/sriovnetwork.k8snetworkplumbingwg.io~1managed-networks",
                }
            ],
        ),
        "auto-sriov-managed-pod-networks",
        "registry",
    )
    refused(
        lambda: patch_pod(w.tenant, pod, annotate(NETWORKS_ANNOTATION, "[]")),
        "auto-sriov-managed-pod-networks",
        "managed-networks",
    )
    # everything else of its own Pod stays the tenant's
    patch_pod(w.tenant, pod, annotate("team.example.com/owner", "a"))


# --- legitimate paths that are not the driver's own writes ------------------------------------


def test_the_garbage_collector_deletes_a_deleted_pods_shadows(world: World) -> None:
    w = world
    pod = make_pod(w, "gone", w.bed.node_name)
    shadow = create_nad(w.driver, shadow_body(w, pod, w.bed.node_name))
    client.CoreV1Api(w.admin).delete_namespaced_pod("gone", w.ns, grace_period_seconds=0)
    # the collector's DELETE passes; our finalizer holds the shadow until the driver releases it
    held = wait_for(
        lambda: (
            (get_nad(w, shadow) or {}).get("metadata", {}).get("deletionTimestamp") and get_nad(w, shadow)
        ),
        30,
        what="GC to delete the shadow",
    )
    patch_nad(w.driver, held, [{"op": "remove", "path": "/metadata/finalizers"}])
    assert wait_for(lambda: get_nad(w, shadow) is None, 10, what="the released shadow to go")


def test_the_operator_still_writes_source_nads(world: World) -> None:
    w = world
    body = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "operator-source", "namespace": w.ns},
        "spec": {"config": json.dumps({"cniVersion": "1.0.0", "name": "operator-source", "type": "sriov"})},
    }
    made = create_nad(w.operator, body)
    made["spec"]["config"] = json.dumps(
        {"cniVersion": "1.0.0", "name": "operator-source", "type": "sriov", "vlan": 7}
    )
    nads(w.operator).replace_namespaced_custom_object(*NAD_API, w.ns, NADS, "operator-source", made)
    delete_nad(w.operator, made)


# --- hostile sizes ------------------------------------------------------------------------------


def _timed(call: Callable[[], Any]) -> tuple[float, ApiException | None]:
    start = time.monotonic()
    try:
        call()
    except ApiException as exc:
        return time.monotonic() - start, exc
    return time.monotonic() - start, None


def test_hostile_networks_annotations_are_refused_within_seconds(world: World) -> None:
    w = world
    # 10,000 entries is over Kubernetes' annotation limit: the API server itself refuses the Pod
    entries = json.dumps([{"name": f"net-{i:05d}", "interface": f"net{i}"} for i in range(10_000)])
    assert len(entries) > ANNOTATIONS_LIMIT
    took, exc = _timed(lambda: make_pod(w, "ten-thousand", w.bed.node_name, {NETWORKS_ANNOTATION: entries}))
    assert exc is not None and exc.status == 422, exc
    assert "Too long" in json.loads(exc.body or "{}")["message"]
    assert took < HOSTILE_SECONDS
    # just under the limit: a managed Pod's annotation is still judged quickly, by the named rule
    near = json.dumps([{"name": "n" * 200}] * 1200)[: ANNOTATIONS_LIMIT - 8192]
    pod = make_pod(w, "near-limit", w.bed.node_name, {NETWORKS_ANNOTATION: "[]"})
    patch_pod(w.driver, pod, annotate(REGISTRY_ANNOTATION, '{"version":1}'))
    took, exc = _timed(lambda: patch_pod(w.tenant, pod, annotate(NETWORKS_ANNOTATION, near)))
    found = None if exc is None else denial(exc)
    assert found is not None and found.rule == "managed-networks", exc
    assert took < HOSTILE_SECONDS
    took, exc = _timed(lambda: patch_pod(w.driver, pod, annotate(NETWORKS_ANNOTATION, near)))
    assert exc is None and took < HOSTILE_SECONDS
    # and the API server keeps serving
    assert uid_of(client.CoreV1Api(w.admin).read_namespaced_pod("near-limit", w.ns)) == pod["metadata"]["uid"]
