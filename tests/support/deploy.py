"""The deployment artifacts as tests see them: manifests, documented examples, required permissions
(where they live and the names they give are the bed's: testbed/deployment.py).

- ``kustomization_resources()`` / ``deploy_objects()``: the YAML an operator installs, in
  kustomization order.
- ``DRIVER_NEEDS`` / ``CNI_NEEDS``: every permission each ServiceAccount needs, with where the
  need comes from; ``FORBIDDEN``: what each must never be able to do.
- ``deploy_cluster`` (session fixture): the test bed with our CRDs installed for real and the
  namespaces the manifests and examples live in; ``.dry_run(obj)`` server-side-applies ``obj``
  with ``dryRun=All`` and strict field validation.

Heavy imports (the Kubernetes client) happen inside the fixtures so that unit-only runs stay fast.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from testbed.deployment import (
    BASE_DIR,
    CNI_NAMESPACE,
    CNI_SA,
    DRIVER_NAMESPACE,
    DRIVER_SA,
    OPERATOR_DIR,
    OPERATOR_NAMESPACE,
    load_documents,
)

if TYPE_CHECKING:
    from kubernetes import client, dynamic

    from testbed.bed import TestBed

REPO_ROOT = Path(__file__).resolve().parents[2]
FIELD_MANAGER = "auto-sriov-deploy-tests"


@dataclass(frozen=True, order=True)
class Permission:
    """One authorization question: may the subject ``verb`` this (sub)resource?"""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    # Empty: asked cluster-wide (all namespaces / cluster-scoped).
    namespace: str = ""

    def attributes(self) -> dict[str, str]:
        attrs = {"verb": self.verb, "group": self.group, "resource": self.resource}
        if self.subresource:
            attrs["subresource"] = self.subresource
        if self.namespace:
            attrs["namespace"] = self.namespace
        return attrs


def _each(
    verbs: str, group: str, resource: str, subresource: str = "", namespace: str = ""
) -> set[Permission]:
    return {Permission(v, group, resource, subresource, namespace) for v in verbs.split()}


DRA = "resource.k8s.io"
NAD = "k8s.cni.cncf.io"
POLICY = "sriovnetwork.k8snetworkplumbingwg.io"

DRIVER_NEEDS: frozenset[Permission] = frozenset(
    # Spec 12.3: verify the consuming Pod and merge its selections; no update, delete or finalizers.
    _each("get list patch", "", "pods")
    # Spec 12.3: source reads, shadow create / finalizer patch / delete, all-namespace orphan list.
    | _each("get list watch create patch delete", NAD, "network-attachment-definitions")
    # Spec 18.2: Events on Pods and claims; spec 8.3: a shadow watch wakes the repair worker.
    | _each("create patch", "", "events")
    # Spec 6.1: the node's UID is the process's recorded node identity; the driver watches its Node.
    | _each("get list watch", "", "nodes")
    # DRA publication and preparation (dra-driver.md 5.2, kept from the upstream driver).
    | _each("get list watch create update patch delete", DRA, "resourceslices")
    | _each("get list watch", DRA, "resourceclaims")
    | _each("update patch", DRA, "resourceclaims", "status")
    | _each("associated-node:update associated-node:patch", DRA, "resourceclaims", "driver")
    | _each("get", DRA, "deviceclasses")
    # Administrator policy objects, read from the driver's own namespace only.
    | _each("get list watch", POLICY, "sriovresourcepolicies", namespace=DRIVER_NAMESPACE)
    | _each("get list watch", POLICY, "deviceattributes", namespace=DRIVER_NAMESPACE)
)

OPERATOR = "sriovnetwork.openshift.io"
# Every call sriov_operator/kube makes, nothing more (spec 12.2.6: the operator reads SriovNetworks
# and source NADs with its network-management rights; generated objects stay in its namespace).
OPERATOR_NEEDS: frozenset[Permission] = frozenset(
    _each("get list watch", OPERATOR, "sriovnetworks")
    | _each("patch", OPERATOR, "sriovnetworks", "status")
    | _each("get list watch create update delete", NAD, "network-attachment-definitions")
    | _each("get list watch", "", "namespaces")
    | _each("get list watch", "", "nodes")
    | _each("create", "", "events")
    | _each("get list watch create update delete", DRA, "deviceclasses")
    | _each("get list watch", OPERATOR, "sriovnetworknodepolicies", namespace=OPERATOR_NAMESPACE)
    | _each("patch", OPERATOR, "sriovnetworknodepolicies", "status", namespace=OPERATOR_NAMESPACE)
    | _each("get list watch", OPERATOR, "sriovnetworknodestates", namespace=OPERATOR_NAMESPACE)
    | _each("get list watch", OPERATOR, "sriovoperatorconfigs", namespace=OPERATOR_NAMESPACE)
    | _each("update", OPERATOR, "sriovoperatorconfigs", "finalizers", namespace=OPERATOR_NAMESPACE)
    | _each("get list watch create update delete", POLICY, "deviceattributes", namespace=OPERATOR_NAMESPACE)
    | _each(
        "get list watch create update delete", POLICY, "sriovresourcepolicies", namespace=OPERATOR_NAMESPACE
    )
)

# The node-state reporter (deploy/operator/node-state.yaml): its own node state only, nothing else.
NODE_STATE_NEEDS: frozenset[Permission] = frozenset(
    _each("get create", OPERATOR, "sriovnetworknodestates", namespace=OPERATOR_NAMESPACE)
    | _each("patch", OPERATOR, "sriovnetworknodestates", "status", namespace=OPERATOR_NAMESPACE)
)

CNI_NEEDS: frozenset[Permission] = frozenset(
    # Live Pod reads on ADD (liveNetworkConfigOnAdd) and the node-local Pod informer.
    _each("get list watch", "", "pods")
    # The network-status annotation is written through pods/status.
    | _each("update patch", "", "pods", "status")
    | _each("get list watch", NAD, "network-attachment-definitions")
    # Its Node's UID: the daemon's NAD cache selects this node's shadows by it (issue 34).
    | _each("get", "", "nodes")
    # Multus's AddedInterface / NoNetworkFound Events on the Pod (issue #18 point 5).
    | _each("create", "", "events")
)

FORBIDDEN: Mapping[str, frozenset[Permission]] = {
    DRIVER_SA: frozenset(
        # It lists Pods (the repair pass, by spec.nodeName), but never changes one except by patch.
        _each("delete update create", "", "pods")
        | _each("update", "", "pods", "finalizers")
        | _each("update", NAD, "network-attachment-definitions")
        | _each("get list", "", "secrets")
        | _each("list", "", "namespaces")
        | _each("get list", POLICY, "sriovresourcepolicies", namespace="kube-system")
    ),
    CNI_SA: frozenset(
        _each("delete update patch create", "", "pods")
        | _each("create patch delete", NAD, "network-attachment-definitions")
        | _each("get list", "", "secrets")
        | _each("list", DRA, "resourceclaims")
    ),
}


def kustomization_resources(deploy_dir: Path = BASE_DIR) -> list[Path]:
    kustomization = yaml.safe_load((deploy_dir / "kustomization.yaml").read_text())
    return [deploy_dir / name for name in kustomization["resources"]]


def deploy_objects(deploy_dir: Path = BASE_DIR) -> list[dict[str, Any]]:
    return [doc for path in kustomization_resources(deploy_dir) for doc in load_documents(path)]


def operator_objects() -> list[dict[str, Any]]:
    """deploy/operator/'s own manifests (the overlay's files, without the base it includes)."""
    kustomization = yaml.safe_load((OPERATOR_DIR / "kustomization.yaml").read_text())
    own = [OPERATOR_DIR / name for name in kustomization["resources"] if not name.startswith("..")]
    return [doc for path in own for doc in load_documents(path)]


class DeployCluster:
    """The test bed prepared for deployment tests: our CRDs installed, target namespaces present."""

    def __init__(self, bed: TestBed, dyn: dynamic.DynamicClient) -> None:
        self.bed = bed
        self.dyn = dyn

    @property
    def api(self) -> client.ApiClient:
        return self.bed.api_client

    def dry_run(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply with dryRun=All; unknown fields are errors, not silently pruned."""
        resource = self.dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        meta = obj["metadata"]
        out = self.dyn.server_side_apply(
            resource,
            body=dict(obj),
            name=meta["name"],
            namespace=meta.get("namespace"),
            field_manager=FIELD_MANAGER,
            dry_run="All",
            field_validation="Strict",
        )
        result: dict[str, Any] = out.to_dict()
        return result


# Namespaces the manifests and the spec's examples place objects in; they must exist before any
# namespaced object can be dry-run (the NamespaceLifecycle admission plugin checks).
TARGET_NAMESPACES = (DRIVER_NAMESPACE, CNI_NAMESPACE, "ai-workloads", OPERATOR_NAMESPACE)


@pytest.fixture(scope="session")
def deploy_cluster(testbed: TestBed) -> Iterator[DeployCluster]:
    from kubernetes import client, dynamic  # noqa: PLC0415 - see module docstring
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - see module docstring

    from testbed.bootstrap import install_crds  # noqa: PLC0415 - see module docstring

    for crds in (BASE_DIR / "crds", OPERATOR_DIR / "crds"):
        install_crds(testbed.api_client, crds)
    core = client.CoreV1Api(testbed.api_client)
    created = []
    for name in TARGET_NAMESPACES:
        try:
            core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": name}}))
            created.append(name)
        except ApiException as exc:
            if exc.status != 409:
                raise
    # A fresh client: discovery must see the CRDs installed just now.
    yield DeployCluster(testbed, dynamic.DynamicClient(testbed.api_client))
    for name in created:
        try:
            core.delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
