"""Kubernetes API adapters for the node agent (official client, plain JSON-shaped dicts)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from driver.discovery import DRIVER_NAME
from sriov_contract.errors import ReasonedError

log = logging.getLogger(__name__)

GROUP = "sriovnetwork.k8snetworkplumbingwg.io"
VERSION = "v1alpha1"


def _items(result: Any) -> list[dict[str, Any]]:
    return list(result.get("items") or [])


class KubeClaims:
    """Live ResourceClaim GETs (resource.k8s.io/v1)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._objs = client.CustomObjectsApi(api)

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any]:
        try:
            obj = self._objs.get_namespaced_custom_object(
                "resource.k8s.io", "v1", namespace, "resourceclaims", name
            )
        except ApiException as exc:
            if exc.status == 404:
                raise ReasonedError(
                    "ClaimNotFound", f"ResourceClaim {namespace}/{name} does not exist; kubelet will retry"
                ) from None
            raise ReasonedError(
                "ClaimReadFailed",
                f"reading ResourceClaim {namespace}/{name} failed: HTTP {exc.status} {exc.reason}",
            ) from None
        if not isinstance(obj, dict):
            raise ReasonedError("ClaimReadFailed", f"ResourceClaim {namespace}/{name} came back malformed")
        return obj


class KubeSlices:
    """This node's ResourceSlices of this driver."""

    def __init__(self, api: client.ApiClient, node_name: str) -> None:
        self._objs = client.CustomObjectsApi(api)
        self.selector = f"spec.nodeName={node_name},spec.driver={DRIVER_NAME}"

    def list(self) -> list[dict[str, Any]]:
        return _items(
            self._objs.list_cluster_custom_object(
                "resource.k8s.io", "v1", "resourceslices", field_selector=self.selector
            )
        )

    def create(self, body: Mapping[str, Any]) -> None:
        self._objs.create_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", dict(body))

    def replace(self, name: str, body: Mapping[str, Any]) -> None:
        self._objs.replace_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name, dict(body))

    def delete(self, name: str) -> None:
        try:
            self._objs.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name)
        except ApiException as exc:
            if exc.status != 404:
                raise


class KubePolicySource:
    """Policies and DeviceAttributes in the driver namespace, and this node's identity and labels."""

    def __init__(self, api: client.ApiClient, namespace: str, node_name: str) -> None:
        self._objs = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._ns = namespace
        self.node_name = node_name

    def policies(self) -> list[dict[str, Any]]:
        return _items(
            self._objs.list_namespaced_custom_object(GROUP, VERSION, self._ns, "sriovresourcepolicies")
        )

    def device_attributes(self) -> list[dict[str, Any]]:
        return _items(self._objs.list_namespaced_custom_object(GROUP, VERSION, self._ns, "deviceattributes"))

    def node(self) -> tuple[str, dict[str, str]]:
        md = self._core.read_node(self.node_name).metadata
        if md is None or not md.uid:
            raise ReasonedError("NodeUnreadable", f"Node {self.node_name} came back without metadata")
        return str(md.uid), dict(md.labels or {})

    def watch_sources(self, slices: KubeSlices) -> list[tuple[str, Callable[..., Any], dict[str, Any]]]:
        """(description, list function, kwargs) for everything that should trigger a reconcile."""
        return [
            (
                "SriovResourcePolicies",
                self._objs.list_namespaced_custom_object,
                {
                    "group": GROUP,
                    "version": VERSION,
                    "namespace": self._ns,
                    "plural": "sriovresourcepolicies",
                },
            ),
            (
                "DeviceAttributes",
                self._objs.list_namespaced_custom_object,
                {"group": GROUP, "version": VERSION, "namespace": self._ns, "plural": "deviceattributes"},
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


def watch_forever(
    what: str,
    list_fn: Callable[..., Any],
    kwargs: Mapping[str, Any],
    on_event: Callable[[], None],
    stop: threading.Event,
) -> None:
    """Call on_event for every change of the watched objects until stop is set; re-lists on errors."""
    while not stop.is_set():
        w = watch.Watch()  # type: ignore[no-untyped-call]
        try:
            for _event in w.stream(list_fn, timeout_seconds=30, **kwargs):  # type: ignore[no-untyped-call]
                on_event()
                if stop.is_set():
                    break
        except Exception as exc:  # the API server restarting or a 410 Gone: re-list and carry on
            log.warning("watch of %s failed (%s); re-listing", what, exc)
            on_event()
            stop.wait(1.0)
        finally:
            w.stop()  # type: ignore[no-untyped-call]
