"""What the CNI suites put on the bed's API server when no driver runs: Pods already bound to the
node, NetworkAttachmentDefinitions, and the driver's managed binding made by hand."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract import keys
from testbed.apiobjects import as_object, items_of
from testbed.cluster import NAD_API
from testbed.managed_shadows import NODE_UID, managed_shadow, registry_annotation


def create_pod(
    api: client.ApiClient, ns: str, name: str, node: str, annotations: dict[str, str]
) -> dict[str, Any]:
    """A Pod already bound to `node` (no scheduler involved); its image is never pulled."""
    body = {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "registry.invalid/none:0"}]},
    }
    pod = client.CoreV1Api(api).create_namespaced_pod(ns, client.V1Pod.model_validate(body))
    return as_object(api.sanitize_for_serialization(pod))


def create_nad(api: client.ApiClient, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` created in `ns`; a UID or namespace it carries (as test vectors do) is left to the server."""
    body = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", **body}
    body["metadata"] = {k: v for k, v in body["metadata"].items() if k not in ("uid", "namespace")}
    return as_object(
        client.CustomObjectsApi(api).create_namespaced_custom_object(*NAD_API[:2], ns, NAD_API[2], body)
    )


def node_uid(api: client.ApiClient, node: str) -> str:
    """The Node's UID, as the driver labels its shadows with (a daemon caches only its own
    node's); the fixed test UID for a node that does not exist."""
    try:
        found = client.CoreV1Api(api).read_node(node)
    except client.ApiException as exc:
        if exc.status == 404:
            return NODE_UID
        raise
    return str(found.metadata.uid) if found.metadata is not None else NODE_UID


def release_by_hand(api: client.ApiClient, namespace: str, *, delete: bool = False) -> None:
    """The driver's release of what `bind_by_hand` made in `namespace`: each managed shadow loses its
    protection finalizer, so deleting the namespace deletes it (a protected shadow labelled with a
    real node's UID would otherwise stay, and that node's orphan scan would report it). With
    `delete`, the shadows go now: a terminating namespace keeps them a while, and that node's
    orphan scan would report them until then."""
    custom = client.CustomObjectsApi(api)
    listing = custom.list_namespaced_custom_object(
        "k8s.cni.cncf.io",
        "v1",
        namespace,
        "network-attachment-definitions",
        label_selector=keys.MANAGED_BY_LABEL,
    )
    for nad in items_of(listing):
        finalizers = nad["metadata"].get("finalizers") or []
        if keys.PROTECTION_FINALIZER in finalizers:
            kept = [f for f in finalizers if f != keys.PROTECTION_FINALIZER]
            try:
                custom.patch_namespaced_custom_object(
                    "k8s.cni.cncf.io",
                    "v1",
                    namespace,
                    "network-attachment-definitions",
                    nad["metadata"]["name"],
                    {"metadata": {"finalizers": kept or None}},
                )
            except ApiException as exc:
                if exc.status != 404:  # the driver released it first
                    raise
        if delete:
            try:
                custom.delete_namespaced_custom_object(
                    "k8s.cni.cncf.io",
                    "v1",
                    namespace,
                    "network-attachment-definitions",
                    nad["metadata"]["name"],
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise


def bind_by_hand(
    api: client.ApiClient,
    pod: dict[str, Any],
    node: str,
    config: str,
    manual: Sequence[dict[str, Any]] = (),
    pci: str = "0000:03:00.1",
    seed: str = "a",
) -> tuple[dict[str, Any], client.V1Pod]:
    """The driver's work on `pod`, done by hand: a protected shadow NAD owned by the Pod carrying
    `config` (whose deviceID is `pci`), and the Pod's selections (the `manual` ones first) and
    registry naming it. `seed` makes the attachment (and so the shadow's name) one of its own.

    Returns the shadow (see `managed_shadow`, with its live UID) and the patched Pod."""
    ns, name, uid = pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]
    shadow = managed_shadow(
        namespace=ns,
        pod_name=name,
        pod_uid=uid,
        node=node,
        config=config,
        pci=pci,
        seed=seed,
        node_uid=node_uid(api, node),
    )
    shadow["entry"]["uid"] = create_nad(api, ns, shadow["nad"])["metadata"]["uid"]
    annotations = {
        keys.NETWORKS_ANNOTATION: json.dumps([*manual, shadow["selection"]]),
        keys.REGISTRY_ANNOTATION: registry_annotation(uid, [shadow["entry"]]),
    }
    patched = client.CoreV1Api(api).patch_namespaced_pod(name, ns, {"metadata": {"annotations": annotations}})
    return shadow, patched
