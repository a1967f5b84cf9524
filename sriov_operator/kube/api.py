"""Every API call sriov-operator makes, as plain JSON-shaped dicts; failures as ApiError.

Reads used for decisions are live GETs/LISTs (spec 12.2.6: no cache reads for decisions); the
watch threads in `watches` only wake the controllers. Writes are create / update with the read
resourceVersion / delete with a UID precondition, so a concurrent change fails the write (409)
instead of being overwritten, and the next pass decides again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_operator.core.keys import (
    DEVICE_ATTRIBUTES,
    DEVICE_CLASS_GROUP,
    DEVICE_CLASS_VERSION,
    DEVICE_CLASSES,
    DRIVER_GROUP,
    DRIVER_VERSION,
    FIELD_MANAGER,
    GROUP,
    NAD_GROUP,
    NADS,
    NETWORKS,
    NODE_STATES,
    OPERATOR_CONFIG_NAME,
    OPERATOR_CONFIGS,
    POLICIES,
    RESOURCE_POLICIES,
    VERSION,
)
from sriov_operator.reasons import API_REQUEST_FAILED, ApiError

log = logging.getLogger(__name__)

# Bounded: a black-holed connection must fail the pass (and be retried), not hang the worker.
REQUEST_TIMEOUT_S: Final = 15.0
NOT_FOUND: Final = 404
PLURALS: Final = {"DeviceAttributes": DEVICE_ATTRIBUTES, "SriovResourcePolicy": RESOURCE_POLICIES}


def _call(what: str, fn: Callable[..., Any], *args: Any, missing_ok: bool = False, **kwargs: Any) -> Any:
    """One client call; None for a 404 when `missing_ok`, ApiError for anything else."""
    try:
        return fn(*args, _request_timeout=REQUEST_TIMEOUT_S, **kwargs)
    except ApiException as exc:
        status = int(exc.status or 0)
        if missing_ok and status == NOT_FOUND:
            return None
        hint = (
            "grant the operator's ServiceAccount the rights in deploy/operator/rbac.yaml"
            if status == 403
            else "the next pass retries"
        )
        raise ApiError(
            API_REQUEST_FAILED, f"{what} failed with HTTP {status} {exc.reason or ''}; {hint}", status=status
        ) from None
    except Exception as exc:  # urllib3 transport errors: no answer, the outcome is unknown
        raise ApiError(
            API_REQUEST_FAILED,
            f"{what} got no response ({exc.__class__.__name__}); the next pass retries",
            status=0,
        ) from None


def _object(found: Any) -> dict[str, Any] | None:
    return found if isinstance(found, dict) else None


def _items(listing: Any) -> list[dict[str, Any]]:
    return list((listing or {}).get("items") or [])


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str((i.get("metadata") or {}).get("name")): i for i in items}


class OperatorApi:
    """The operator's view of the cluster; one instance shared by both controllers."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.objs = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    # -- sriovnetwork.openshift.io --------------------------------------------------------------

    def get_config(self, namespace: str) -> dict[str, Any] | None:
        what = f"GET SriovOperatorConfig {namespace}/{OPERATOR_CONFIG_NAME}"
        fn = self.objs.get_namespaced_custom_object
        found = _call(
            what, fn, GROUP, VERSION, namespace, OPERATOR_CONFIGS, OPERATOR_CONFIG_NAME, missing_ok=True
        )
        return _object(found)

    def list_policies(self, namespace: str) -> list[dict[str, Any]]:
        fn = self.objs.list_namespaced_custom_object
        return _items(
            _call(f"LIST SriovNetworkNodePolicies in {namespace}", fn, GROUP, VERSION, namespace, POLICIES)
        )

    def list_node_states(self, namespace: str) -> dict[str, dict[str, Any]]:
        fn = self.objs.list_namespaced_custom_object
        listing = _call(
            f"LIST SriovNetworkNodeStates in {namespace}", fn, GROUP, VERSION, namespace, NODE_STATES
        )
        return _by_name(_items(listing))

    def get_node_state(self, namespace: str, name: str) -> dict[str, Any] | None:
        fn = self.objs.get_namespaced_custom_object
        what = f"GET SriovNetworkNodeState {namespace}/{name}"
        return _object(_call(what, fn, GROUP, VERSION, namespace, NODE_STATES, name, missing_ok=True))

    def create_node_state(self, namespace: str, name: str) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "SriovNetworkNodeState",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {},
        }
        fn = self.objs.create_namespaced_custom_object
        _call(
            f"CREATE SriovNetworkNodeState {namespace}/{name}",
            fn,
            GROUP,
            VERSION,
            namespace,
            NODE_STATES,
            body,
        )

    def patch_node_state_status(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        """A merge patch of the whole reported inventory: `interfaces` is replaced as one list."""
        fn = self.objs.patch_namespaced_custom_object_status
        what = f"PATCH SriovNetworkNodeState {namespace}/{name} status"
        _call(what, fn, GROUP, VERSION, namespace, NODE_STATES, name, dict(body))

    def list_networks(self) -> list[dict[str, Any]]:
        fn = self.objs.list_cluster_custom_object
        return _items(_call("LIST SriovNetworks (all namespaces)", fn, GROUP, VERSION, NETWORKS))

    def get_network(self, namespace: str, name: str) -> dict[str, Any] | None:
        fn = self.objs.get_namespaced_custom_object
        return _object(
            _call(
                f"GET SriovNetwork {namespace}/{name}",
                fn,
                GROUP,
                VERSION,
                namespace,
                NETWORKS,
                name,
                missing_ok=True,
            )
        )

    def apply_condition(self, plural: str, namespace: str, name: str, condition: Mapping[str, Any]) -> None:
        """Server-side apply of one condition on /status: other writers' conditions stay (the list
        is a map keyed by type), and the field manager owns only this entry."""
        kind = {POLICIES: "SriovNetworkNodePolicy", NETWORKS: "SriovNetwork"}[plural]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace},
            "status": {"conditions": [dict(condition)]},
        }
        _call(
            f"APPLY {kind} {namespace}/{name} status",
            self.objs.patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            plural,
            name,
            body,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    # -- k8s.cni.cncf.io ------------------------------------------------------------------------

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        fn = self.objs.get_namespaced_custom_object
        what = f"GET NetworkAttachmentDefinition {namespace}/{name}"
        return _object(_call(what, fn, NAD_GROUP, "v1", namespace, NADS, name, missing_ok=True))

    def list_nads(self) -> list[dict[str, Any]]:
        fn = self.objs.list_cluster_custom_object
        return _items(_call("LIST NetworkAttachmentDefinitions (all namespaces)", fn, NAD_GROUP, "v1", NADS))

    def create_nad(self, body: Mapping[str, Any]) -> None:
        md = body["metadata"]
        fn = self.objs.create_namespaced_custom_object
        _call(
            f"CREATE NetworkAttachmentDefinition {md['namespace']}/{md['name']}",
            fn,
            NAD_GROUP,
            "v1",
            md["namespace"],
            NADS,
            dict(body),
        )

    def replace_nad(self, body: Mapping[str, Any]) -> None:
        md = body["metadata"]
        fn = self.objs.replace_namespaced_custom_object
        what = f"UPDATE NetworkAttachmentDefinition {md['namespace']}/{md['name']}"
        _call(what, fn, NAD_GROUP, "v1", md["namespace"], NADS, md["name"], dict(body))

    def delete_nad(self, namespace: str, name: str, uid: str) -> None:
        fn = self.objs.delete_namespaced_custom_object
        what = f"DELETE NetworkAttachmentDefinition {namespace}/{name}"
        _call(
            what,
            fn,
            NAD_GROUP,
            "v1",
            namespace,
            NADS,
            name,
            body={"preconditions": {"uid": uid}},
            missing_ok=True,
        )

    # -- core -----------------------------------------------------------------------------------

    def namespace_exists(self, namespace: str) -> bool:
        return (
            _call(f"GET Namespace {namespace}", self.core.read_namespace, namespace, missing_ok=True)
            is not None
        )

    def list_nodes(self) -> list[dict[str, Any]]:
        listing = _call("LIST Nodes", self.core.list_node)
        # Only names and labels are used; the typed model is turned back into API JSON.
        return [
            {
                "metadata": {
                    "name": n.metadata.name,
                    "uid": n.metadata.uid,
                    "labels": dict(n.metadata.labels or {}),
                }
            }
            for n in (listing.items if listing is not None else [])
        ]

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        _call(f"CREATE Event in {namespace}", self.core.create_namespaced_event, namespace, dict(body))

    # -- the driver's policy API ----------------------------------------------------------------

    def list_generated(self, kind: str, namespace: str) -> dict[str, dict[str, Any]]:
        """Every object of `kind` in the policy namespace (not only labelled ones: an unlabelled
        object of a desired name must be seen to be left alone); DeviceClasses cluster-wide."""
        if kind == "DeviceClass":
            cls = self.objs.list_cluster_custom_object
            what = "LIST DeviceClasses"
            return _by_name(
                _items(_call(what, cls, DEVICE_CLASS_GROUP, DEVICE_CLASS_VERSION, DEVICE_CLASSES))
            )
        fn = self.objs.list_namespaced_custom_object
        listing = _call(
            f"LIST {kind} in {namespace}", fn, DRIVER_GROUP, DRIVER_VERSION, namespace, PLURALS[kind]
        )
        return _by_name(_items(listing))

    def create(self, kind: str, namespace: str, body: Mapping[str, Any]) -> None:
        what = f"CREATE {kind} {_where(kind, namespace)}{body['metadata']['name']}"
        if kind == "DeviceClass":
            cls = self.objs.create_cluster_custom_object
            _call(what, cls, DEVICE_CLASS_GROUP, DEVICE_CLASS_VERSION, DEVICE_CLASSES, dict(body))
            return
        fn = self.objs.create_namespaced_custom_object
        _call(what, fn, DRIVER_GROUP, DRIVER_VERSION, namespace, PLURALS[kind], dict(body))

    def replace(self, kind: str, namespace: str, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        what = f"UPDATE {kind} {_where(kind, namespace)}{name}"
        if kind == "DeviceClass":
            cls = self.objs.replace_cluster_custom_object
            _call(what, cls, DEVICE_CLASS_GROUP, DEVICE_CLASS_VERSION, DEVICE_CLASSES, name, dict(body))
            return
        fn = self.objs.replace_namespaced_custom_object
        _call(what, fn, DRIVER_GROUP, DRIVER_VERSION, namespace, PLURALS[kind], name, dict(body))

    def delete(self, kind: str, namespace: str, name: str, uid: str) -> None:
        body = {"preconditions": {"uid": uid}} if uid else None
        what = f"DELETE {kind} {_where(kind, namespace)}{name}"
        if kind == "DeviceClass":
            cls = self.objs.delete_cluster_custom_object
            _call(
                what,
                cls,
                DEVICE_CLASS_GROUP,
                DEVICE_CLASS_VERSION,
                DEVICE_CLASSES,
                name,
                body=body,
                missing_ok=True,
            )
            return
        fn = self.objs.delete_namespaced_custom_object
        _call(
            what, fn, DRIVER_GROUP, DRIVER_VERSION, namespace, PLURALS[kind], name, body=body, missing_ok=True
        )


def _where(kind: str, namespace: str) -> str:
    return "" if kind == "DeviceClass" else f"{namespace}/"
