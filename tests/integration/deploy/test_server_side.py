"""The real API server's verdict on everything we ship or document: deploy/ and the spec's 14.1/14.2.

Every object goes through server-side apply with dryRun=All and strict field validation, so
schema errors, unknown (would-be-pruned) fields, admission and CEL compilation all count. The
ServiceAccounts, bound by deploy/'s RBAC for real, are then asked what they may do.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import access
from testbed.deployment import (
    BASE_DIR,
    CNI_NAMESPACE,
    CNI_SA,
    DRIVER_NAMESPACE,
    DRIVER_SA,
    EXAMPLES_DIR,
    OPERATOR_DIR,
    load_documents,
    service_account_user,
)
from tests.support.deploy import CNI_NEEDS, DRIVER_NEEDS, FORBIDDEN, DeployCluster, Permission, deploy_objects
from tests.support.helm import kustomize, render_chart

pytestmark = pytest.mark.integration

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
ACCOUNTS = {DRIVER_SA: (DRIVER_NAMESPACE, DRIVER_NEEDS), CNI_SA: (CNI_NAMESPACE, CNI_NEEDS)}


def rejection(cluster: DeployCluster, obj: dict[str, Any]) -> str | None:
    """None when the server accepts ``obj`` in a dry run, else its reason and message."""
    try:
        out = cluster.dry_run(obj)
    except ApiException as exc:
        return f"{obj['kind']} {obj['metadata']['name']}: HTTP {exc.status}: {exc.body}"
    assert out["metadata"]["name"] == obj["metadata"]["name"]
    return None


def privileged_fields(obj: dict[str, Any]) -> list[str]:
    spec = obj["spec"]["template"]["spec"]
    return [
        f"spec.template.spec.{kind}[{i}].securityContext.privileged"
        for kind in ("initContainers", "containers")
        for i, c in enumerate(spec.get(kind, []))
        if c.get("securityContext", {}).get("privileged")
    ]


def without_privileged(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    spec = out["spec"]["template"]["spec"]
    for c in spec.get("initContainers", []) + spec["containers"]:
        c.get("securityContext", {}).pop("privileged", None)
    return out


@pytest.fixture(scope="module")
def privileged_allowed(deploy_cluster: DeployCluster) -> bool:
    """Whether this apiserver runs with --allow-privileged (real clusters do; a bare one does not)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged-probe", "namespace": DRIVER_NAMESPACE},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
    }
    return rejection(deploy_cluster, pod) is None


def dry_run_failures(
    cluster: DeployCluster, objects: list[dict[str, Any]], privileged_allowed: bool
) -> list[str]:
    failures = []
    for obj in objects:
        if obj["kind"] == "DaemonSet" and not privileged_allowed:
            failures += daemonset_under_cluster_policy(cluster, obj)
            continue
        found = rejection(cluster, obj)
        if found:
            failures.append(found)
    return failures


def test_every_deploy_manifest_passes_server_side_dry_run(deploy_cluster, privileged_allowed) -> None:
    assert dry_run_failures(deploy_cluster, deploy_objects(), privileged_allowed) == []


@pytest.mark.parametrize("directory", [BASE_DIR, OPERATOR_DIR], ids=["base", "operator"])
def test_what_kubectl_apply_k_sends_passes_server_side_dry_run(
    deploy_cluster, privileged_allowed, kubectl, directory
) -> None:
    """Each kustomization as kubectl builds it where it stands (the overlay includes ../base)."""
    assert dry_run_failures(deploy_cluster, kustomize(kubectl, directory), privileged_allowed) == []


@pytest.mark.parametrize(
    "sets",
    [(), ("operator.enabled=true",), ("cni.mode=thin", "driver.metricsPort=0", "cni.image.pullPolicy=Never")],
    ids=["defaults", "operator", "thin"],
)
def test_every_object_the_helm_chart_renders_passes_server_side_dry_run(
    deploy_cluster, privileged_allowed, helm, sets
) -> None:
    assert dry_run_failures(deploy_cluster, render_chart(helm, *sets), privileged_allowed) == []


def daemonset_under_cluster_policy(cluster: DeployCluster, obj: dict[str, Any]) -> list[str]:
    """Without --allow-privileged the only permitted complaint is each privileged container, by
    field; everything else of the DaemonSet must then pass on its own."""
    try:
        cluster.dry_run(obj)
    except ApiException as exc:
        assert exc.status == 422, exc.body
        causes = json.loads(exc.body or "{}")["details"]["causes"]
        assert sorted(c["field"] for c in causes) == sorted(privileged_fields(obj)), exc.body
        assert {c["message"] for c in causes} == {"Forbidden: disallowed by cluster policy"}, exc.body
    found = rejection(cluster, without_privileged(obj))
    return [found] if found else []


@pytest.mark.parametrize(
    "example",
    [
        "one-network-deviceclass.yaml",
        "multus-auto-gpu-nic-pairs.yaml",
        "operator-two-rails.yaml",
        "extended-resource-vfs.yaml",
    ],
)
def test_every_spec_example_passes_server_side_dry_run(deploy_cluster, example) -> None:
    objects = load_documents(EXAMPLES_DIR / example)
    failures = [f for f in (rejection(deploy_cluster, o) for o in objects) if f]
    assert failures == []


def gpu_nic_pairs() -> dict[str, Any]:
    (template,) = [
        o
        for o in load_documents(EXAMPLES_DIR / "multus-auto-gpu-nic-pairs.yaml")
        if o["kind"] == "ResourceClaimTemplate"
    ]
    return template


def test_the_distinct_root_constraint_is_accepted_and_kept(deploy_cluster) -> None:
    template = gpu_nic_pairs()
    extra = load_documents(EXAMPLES_DIR / "distinct-root-constraint.yaml")[0]
    template["spec"]["spec"]["devices"]["constraints"] += extra
    out = deploy_cluster.dry_run(template)
    # A disabled feature gate drops the field silently instead of rejecting it.
    assert out["spec"]["spec"]["devices"]["constraints"] == template["spec"]["spec"]["devices"]["constraints"]


def test_device_class_cel_is_compiled_by_the_server(deploy_cluster) -> None:
    (good,) = [
        o
        for o in load_documents(EXAMPLES_DIR / "multus-auto-gpu-nic-pairs.yaml")
        if o["metadata"]["name"] == "sriov-pcie-netdevice"
    ]
    broken = copy.deepcopy(good)
    broken["spec"]["selectors"][0]["cel"]["expression"] = good["spec"]["selectors"][0]["cel"]["expression"][
        :-3
    ]
    with pytest.raises(ApiException) as info:
        deploy_cluster.dry_run(broken)
    assert info.value.status == 422
    assert "compilation failed" in (info.value.body or "")
    assert rejection(deploy_cluster, good) is None


@pytest.fixture(scope="module")
def bound_accounts(deploy_cluster: DeployCluster) -> Iterator[client.AuthorizationV1Api]:
    """deploy/'s ServiceAccounts and RBAC, applied for real; afterwards the ones this module
    created are deleted. Other suites on the session's bed (the e2e stack, the shipped-RBAC
    driver identity) apply the same objects and keep relying on them, so those stay."""
    objects = [o for o in deploy_objects() if o["kind"] in RBAC_KINDS]
    created = [o for o in objects if not access.object_exists(deploy_cluster.api, o)]
    deploy_cluster.bed.apply(objects)
    auth = client.AuthorizationV1Api(deploy_cluster.api)
    # The authorizer's RBAC cache catches up asynchronously: wait until each binding (cluster-wide
    # and namespaced) shows in one of its grants.
    for name, (namespace, needs) in ACCOUNTS.items():
        for scope in {p.namespace for p in needs}:
            wait_allowed(auth, namespace, name, min(p for p in needs if p.namespace == scope))
    yield auth
    access.delete_objects(deploy_cluster.api, created)


def allowed(auth: client.AuthorizationV1Api, namespace: str, account: str, perm: Permission) -> bool:
    user, groups = service_account_user(namespace, account)
    review = client.V1SubjectAccessReview.model_validate(
        {"spec": {"user": user, "groups": groups, "resourceAttributes": perm.attributes()}}
    )
    status = auth.create_subject_access_review(review).status
    assert status is not None
    return bool(status.allowed)


def wait_allowed(auth: client.AuthorizationV1Api, namespace: str, account: str, perm: Permission) -> None:
    deadline = time.monotonic() + 30
    while not allowed(auth, namespace, account, perm):
        assert time.monotonic() < deadline, f"RBAC never allowed {account} {perm}"
        time.sleep(0.2)


@pytest.mark.parametrize("account", sorted(ACCOUNTS))
def test_each_service_account_may_do_everything_it_needs(bound_accounts, account) -> None:
    namespace, needs = ACCOUNTS[account]
    denied = sorted(p for p in needs if not allowed(bound_accounts, namespace, account, p))
    assert denied == []


@pytest.mark.parametrize("account", sorted(ACCOUNTS))
def test_each_service_account_is_refused_what_it_must_not_do(bound_accounts, account) -> None:
    namespace, _ = ACCOUNTS[account]
    granted = sorted(p for p in FORBIDDEN[account] if allowed(bound_accounts, namespace, account, p))
    assert granted == []


def token_client(cluster: DeployCluster, namespace: str, account: str) -> client.ApiClient:
    core = client.CoreV1Api(cluster.api)
    request = client.AuthenticationV1TokenRequest.model_validate({"spec": {"expirationSeconds": 600}})
    status = core.create_namespaced_service_account_token(account, namespace, request).status
    assert status is not None and status.token
    config = client.Configuration(host=cluster.bed.server)
    config.ssl_ca_cert = str(cluster.bed.ca_file)
    config.api_key = {"authorization": status.token}
    config.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(config)


def status_of(call: Any) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_real_service_account_tokens_get_exactly_these_answers(deploy_cluster, bound_accounts) -> None:
    """The same verdicts through authentication, not only through SubjectAccessReview."""
    answers = {}
    for account, (namespace, _) in ACCOUNTS.items():
        with token_client(deploy_cluster, namespace, account) as api:
            core = client.CoreV1Api(api)
            nads = client.CustomObjectsApi(api)
            answers[account] = {
                "list NADs in all namespaces": status_of(
                    lambda nads=nads: nads.list_cluster_custom_object(
                        "k8s.cni.cncf.io", "v1", "network-attachment-definitions"
                    )
                ),
                "get a Pod": status_of(lambda core=core: core.read_namespaced_pod("absent", "default")),
                "delete a Pod": status_of(lambda core=core: core.delete_namespaced_pod("absent", "default")),
                "list Secrets": status_of(lambda core=core: core.list_namespaced_secret("default")),
            }
    # 404 means authorized and then not found: the question reached the object lookup.
    assert answers == {
        DRIVER_SA: {
            "list NADs in all namespaces": 200,
            "get a Pod": 404,
            "delete a Pod": 403,
            "list Secrets": 403,
        },
        CNI_SA: {
            "list NADs in all namespaces": 200,
            "get a Pod": 404,
            "delete a Pod": 403,
            "list Secrets": 403,
        },
    }
