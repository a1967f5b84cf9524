"""The node agent's Kubernetes resource adapters: claims, Pods, NADs, shadows, Events, slices,
policies and access checks as plain JSON-shaped dicts, each call one request through
sriov_dra.kube.transport."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import quote

from kubernetes import client

from sriov_contract.errors import ReasonedError
from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NODE_UID_LABEL
from sriov_dra import reasons
from sriov_dra.apierrors import NOT_FOUND, api_error
from sriov_dra.kube.transport import METADATA_LIST, items, json_patch, list_streamed, request, required
from sriov_dra.model import DRA_GROUP, DRA_VERSION, DRIVER_NAME, NAD_GROUP, POLICY_GROUP, POLICY_VERSION


class KubeClaims:
    """Live ResourceClaim reads and status updates (resource.k8s.io/v1)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    @staticmethod
    def _path(namespace: str, name: str) -> str:
        return f"/apis/{DRA_GROUP}/{DRA_VERSION}/namespaces/{quote(namespace)}/resourceclaims/{quote(name)}"

    def patch_claim_status(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON Patch of the status subresource. Not an update: the client cannot reproduce the
        stored bytes of the allocation's opaque parameters, which the server compares as immutable."""
        path = f"{self._path(namespace, name)}/status"
        return json_patch(self._api, path, f"ResourceClaim {namespace}/{name} status", ops)

    def list_claims(self, namespace: str) -> Iterator[dict[str, Any]]:
        """The ResourceClaims of one namespace in one request. A claim has no field naming its
        node, so a node reads the namespaces its own claims are in, never the whole cluster's:
        what a pass costs grows with the node's workloads, not with the cluster (issue 34)."""
        path = f"/apis/{DRA_GROUP}/{DRA_VERSION}/namespaces/{quote(namespace)}/resourceclaims"
        return list_streamed(self._api, path, f"ResourceClaims in {namespace}", [])

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any]:
        what = f"ResourceClaim {namespace}/{name}"
        claim = request(self._api, "GET", self._path(namespace, name), what, reason=reasons.CLAIM_READ_FAILED)
        if claim is None:
            raise api_error(NOT_FOUND, "GET", what, reason=reasons.CLAIM_NOT_FOUND)
        return claim


class KubePods:
    """Live Pod reads and JSON Patches (no update, no delete: the driver has no such rights)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        return request(self._api, "GET", path, f"Pod {namespace}/{name}")

    def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        return json_patch(self._api, path, f"Pod {namespace}/{name}", ops)

    def list_node_pods(self, node_name: str) -> Iterator[dict[str, Any]]:
        """Metadata only where the API server can (a PartialObjectMetadataList: less than half the
        bytes to encode and decode), the full Pods where it cannot: content negotiation falls back
        to the second type, and either serves the repair pass, which reads only metadata."""
        return list_streamed(
            self._api,
            "/api/v1/pods",
            f"Pods on {node_name}",
            [("fieldSelector", f"spec.nodeName={node_name}")],
            accept=METADATA_LIST,
        )


class KubeNads:
    """NetworkAttachmentDefinitions on their main endpoint (the CRD has no finalizers subresource)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    @staticmethod
    def _path(namespace: str, name: str = "") -> str:
        base = f"/apis/k8s.cni.cncf.io/v1/namespaces/{quote(namespace)}/network-attachment-definitions"
        return f"{base}/{quote(name)}" if name else base

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        return request(
            self._api, "GET", self._path(namespace, name), f"NetworkAttachmentDefinition {namespace}/{name}"
        )

    def create_nad(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        what = f"NetworkAttachmentDefinition {meta['namespace']}/{meta['name']}"
        return required(
            request(self._api, "POST", self._path(meta["namespace"]), what, body=dict(body)), "POST", what
        )

    def delete_nad(self, namespace: str, name: str, uid: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        what = f"NetworkAttachmentDefinition {namespace}/{name} (UID {uid})"
        request(self._api, "DELETE", self._path(namespace, name), what, body=body)

    def patch_nad(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        return json_patch(
            self._api, self._path(namespace, name), f"NetworkAttachmentDefinition {namespace}/{name}", ops
        )


class KubeShadowLister:
    """Managed shadows of one node across all namespaces, found by their labels (spec 8.5: listing
    only the checkpoint's namespaces would miss orphans)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._objs = client.CustomObjectsApi(api)

    @staticmethod
    def selector(node_uid: str) -> str:
        return f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{NODE_UID_LABEL}={node_uid}"

    def list_shadows(self, node_uid: str) -> Iterator[dict[str, Any]]:
        return self._list(node_uid, "")

    def list_namespace_shadows(self, node_uid: str, namespace: str) -> Iterator[dict[str, Any]]:
        """One namespace's: the API server then reads only that namespace, where a selection
        across all namespaces reads every NAD of the cluster (issue 34)."""
        return self._list(node_uid, namespace)

    def _list(self, node_uid: str, namespace: str) -> Iterator[dict[str, Any]]:
        scope = f"/namespaces/{quote(namespace)}" if namespace else ""
        return list_streamed(
            self._api,
            f"/apis/k8s.cni.cncf.io/v1{scope}/network-attachment-definitions",
            f"NetworkAttachmentDefinitions (managed shadows{' in ' + namespace if namespace else ''})",
            [("labelSelector", self.selector(node_uid))],
        )

    def watch_source(self, node_uid: str) -> tuple[str, Callable[..., Any], dict[str, Any]]:
        """(description, list function, kwargs) for watch_forever: any change to our shadows."""
        return (
            "managed shadows",
            self._objs.list_cluster_custom_object,
            {
                "group": NAD_GROUP,
                "version": "v1",
                "plural": "network-attachment-definitions",
                "label_selector": self.selector(node_uid),
            },
        )


class KubeEvents:
    """core/v1 Events (the EventSink of sriov_dra.observe.eventrecorder)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        path = f"/api/v1/namespaces/{quote(namespace)}/events"
        request(self._api, "POST", path, f"Event in {namespace}", body=dict(body))


class KubeAccess:
    """What the API server serves, and what the current credentials may do (preflight)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def served_resources(self, group_version: str) -> set[str]:
        """Resource names served under /apis/<group_version>; empty when the group is not served."""
        try:
            listing = request(self._api, "GET", f"/apis/{group_version}", f"API group {group_version}")
        except ReasonedError:
            return set()
        return {str(r.get("name")) for r in (listing or {}).get("resources") or []}

    def may(self, attributes: Mapping[str, str]) -> bool:
        """A SelfSubjectAccessReview of `attributes` (verb, group, resource, ...)."""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": dict(attributes)},
        }
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        answer = request(self._api, "POST", path, "SelfSubjectAccessReview", body=body) or {}
        return bool((answer.get("status") or {}).get("allowed"))


class KubeSlices:
    """This node's ResourceSlices of this driver."""

    _PATH: Final = f"/apis/{DRA_GROUP}/{DRA_VERSION}/resourceslices"

    def __init__(self, api: client.ApiClient, node_name: str) -> None:
        self._api = api
        self.selector = f"spec.nodeName={node_name},spec.driver={DRIVER_NAME}"

    def list(self) -> list[dict[str, Any]]:
        what = "ResourceSlices of this node"
        listing = request(self._api, "GET", self._PATH, what, query=[("fieldSelector", self.selector)])
        return items(required(listing, "GET", what))

    def create(self, body: Mapping[str, Any]) -> None:
        what = f"ResourceSlice {(body.get('metadata') or {}).get('name', '')}"
        request(self._api, "POST", self._PATH, what, body=dict(body))

    def replace(self, name: str, body: Mapping[str, Any]) -> None:
        request(self._api, "PUT", f"{self._PATH}/{quote(name)}", f"ResourceSlice {name}", body=dict(body))

    def delete(self, name: str) -> None:
        """Deletes the slice; one that is already gone is no failure."""
        request(self._api, "DELETE", f"{self._PATH}/{quote(name)}", f"ResourceSlice {name}")


class KubePolicySource:
    """Policies and DeviceAttributes in the driver namespace, and this node's identity and labels."""

    def __init__(self, api: client.ApiClient, namespace: str, node_name: str) -> None:
        self._api = api
        self._objs = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._ns = namespace
        self.node_name = node_name

    def _list(self, plural: str, what: str) -> list[dict[str, Any]]:
        path = f"/apis/{POLICY_GROUP}/{POLICY_VERSION}/namespaces/{quote(self._ns)}/{plural}"
        return items(required(request(self._api, "GET", path, what), "GET", what))

    def policies(self) -> list[dict[str, Any]]:
        return self._list("sriovresourcepolicies", f"SriovResourcePolicies in {self._ns}")

    def device_attributes(self) -> list[dict[str, Any]]:
        return self._list("deviceattributes", f"DeviceAttributes in {self._ns}")

    def node(self) -> tuple[str, dict[str, str]]:
        what = f"Node {self.node_name}"
        node = required(
            request(self._api, "GET", f"/api/v1/nodes/{quote(self.node_name)}", what), "GET", what
        )
        md = node.get("metadata")
        if not isinstance(md, dict) or not md.get("uid"):
            raise ReasonedError(reasons.NODE_UNREADABLE, f"Node {self.node_name} came back without metadata")
        return str(md["uid"]), {str(k): str(v) for k, v in (md.get("labels") or {}).items()}

    def watch_sources(self, slices: KubeSlices) -> list[tuple[str, Callable[..., Any], dict[str, Any]]]:
        """(description, list function, kwargs) for everything that should trigger a reconcile."""
        return [
            (
                "SriovResourcePolicies",
                self._objs.list_namespaced_custom_object,
                {
                    "group": POLICY_GROUP,
                    "version": POLICY_VERSION,
                    "namespace": self._ns,
                    "plural": "sriovresourcepolicies",
                },
            ),
            (
                "DeviceAttributes",
                self._objs.list_namespaced_custom_object,
                {
                    "group": POLICY_GROUP,
                    "version": POLICY_VERSION,
                    "namespace": self._ns,
                    "plural": "deviceattributes",
                },
            ),
            ("Node", self._core.list_node, {"field_selector": f"metadata.name={self.node_name}"}),
            (
                "ResourceSlices",
                self._objs.list_cluster_custom_object,
                {
                    "group": "resource.k8s.io",
                    "version": "v1",
                    "plural": "resourceslices",
                    "field_selector": slices.selector,
                },
            ),
        ]
