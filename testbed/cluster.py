"""The API server as the scenarios' administrator and workload user see it, from one node of a
stack: objects applied and deleted, nodes labelled, Pods created (as that node's kubelet can run
them) and awaited, and what the product wrote read back: shadow NADs, claims, whereabouts' leases.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from sriov_contract import keys
from sriov_contract.errors import ReasonedError
from testbed.apiobjects import as_object, items_of
from testbed.claims import RESOURCE_API
from testbed.waiting import WaitTimeout, wait_for

if TYPE_CHECKING:
    from testbed.bed import TestBed
    from testbed.kubelets import Kubelet

NAD_API = ("k8s.cni.cncf.io", "v1", "network-attachment-definitions")
WHEREABOUTS_API = ("whereabouts.cni.cncf.io", "v1alpha1")
POD_START_TIMEOUT = 120.0
CLEANUP_TIMEOUT = 90.0


class Cluster:
    """``Cluster(bed, kubelet)``: the bed's API server; Pods are made runnable by ``kubelet``, and a
    Pod that does not start is explained with what that kubelet reported."""

    def __init__(self, bed: TestBed, kubelet: Kubelet) -> None:
        self.bed = bed
        self.kubelet = kubelet
        self.api = bed.api_client
        self.core = client.CoreV1Api(self.api)
        self.objects = client.CustomObjectsApi(self.api)
        self.dyn = dynamic.DynamicClient(self.api)

    # -- objects ----------------------------------------------------------------------------------

    def list_objects(
        self, group: str, version: str, plural: str, *, namespace: str | None = None, **query: Any
    ) -> list[dict[str, Any]]:
        if namespace is None:
            return items_of(self.objects.list_cluster_custom_object(group, version, plural, **query))
        return items_of(
            self.objects.list_namespaced_custom_object(group, version, namespace, plural, **query)
        )

    def get_object(
        self, group: str, version: str, plural: str, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        if namespace is None:
            return as_object(self.objects.get_cluster_custom_object(group, version, plural, name))
        return as_object(self.objects.get_namespaced_custom_object(group, version, namespace, plural, name))

    def apply(self, docs: Sequence[Mapping[str, Any]]) -> None:
        self.bed.apply(docs)

    def delete(self, docs: Sequence[Mapping[str, Any]]) -> None:
        for doc in reversed(docs):
            if doc["kind"] == "Namespace":
                continue  # shared with whatever else lives there
            resource = self.dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            with contextlib.suppress(ApiException):
                resource.delete(name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"))

    def label_nodes(self, names: Sequence[str], label: str, on: bool) -> None:
        escaped = label.replace("~", "~0").replace("/", "~1")
        for name in names:
            if on:
                self.core.patch_node(name, {"metadata": {"labels": {label: "true"}}})
            else:
                with contextlib.suppress(ApiException):
                    self.core.patch_node(name, [{"op": "remove", "path": f"/metadata/labels/{escaped}"}])

    def slices(self, node_name: str, driver: str | None = None) -> list[dict[str, Any]]:
        """The ResourceSlices of one node (of one driver)."""
        selector = f"spec.nodeName={node_name}" + (f",spec.driver={driver}" if driver else "")
        return self.list_objects(*RESOURCE_API, "resourceslices", field_selector=selector)

    def delete_slices(self, slices: Sequence[Mapping[str, Any]]) -> None:
        for item in slices:
            with contextlib.suppress(ApiException):
                self.objects.delete_cluster_custom_object(
                    *RESOURCE_API, "resourceslices", item["metadata"]["name"]
                )

    # -- Pods -------------------------------------------------------------------------------------

    def create_pod(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        created = self.core.create_namespaced_pod(
            pod["metadata"]["namespace"], client.V1Pod.model_validate(self.kubelet.runnable(pod))
        )
        out: dict[str, Any] = self.api.sanitize_for_serialization(created)
        return out

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            pod: dict[str, Any] = self.api.sanitize_for_serialization(
                self.core.read_namespaced_pod(name, namespace)
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return pod

    def wait_running(self, namespace: str, name: str, timeout: float = POD_START_TIMEOUT) -> dict[str, Any]:

        def running() -> dict[str, Any] | None:
            pod = self.read_pod(namespace, name)
            return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None

        try:
            return wait_for(running, timeout, what=f"Pod {namespace}/{name} Running", interval=0.2)
        except WaitTimeout as exc:
            pod = self.read_pod(namespace, name) or {}
            conditions = [
                (c["type"], c.get("reason"), c.get("message"))
                for c in (pod.get("status") or {}).get("conditions") or []
            ]
            errors = self.kubelet.start_errors(name)
            raise ReasonedError(
                "PodNotRunning",
                f"{exc.message}; conditions {conditions}; kubelet: {errors or 'no error recorded'}",
            ) from None

    def delete_pod(self, namespace: str, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.core.delete_namespaced_pod(name, namespace)
        wait_for(
            lambda: self.read_pod(namespace, name) is None,
            CLEANUP_TIMEOUT,
            what=f"Pod {namespace}/{name} gone",
            interval=0.2,
        )

    # -- what the product wrote -------------------------------------------------------------------

    def shadows(self, namespace: str, pod_uid: str | None = None) -> list[dict[str, Any]]:
        out = []
        for nad in self.list_objects(*NAD_API, namespace=namespace):
            binding = (nad["metadata"].get("annotations") or {}).get(keys.BINDING_ANNOTATION)
            if binding and (pod_uid is None or json.loads(binding).get("podUID") == pod_uid):
                out.append(nad)
        return out

    def nad(self, namespace: str, name: str) -> dict[str, Any]:
        return self.get_object(*NAD_API, name, namespace=namespace)

    def claim_of(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """The Pod's one claim: from its template, or the scheduler's for its extended resources."""
        status = pod["status"]
        extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        (name,) = [
            s["resourceClaimName"]
            for s in status.get("resourceClaimStatuses") or []
            if s.get("resourceClaimName")
        ] + ([extended] if extended else [])
        return self.get_object(*RESOURCE_API, "resourceclaims", name, namespace=pod["metadata"]["namespace"])

    def whereabouts_allocations(self, network_names: Sequence[str]) -> list[str]:
        """IPs whereabouts still holds on these networks (IPPools and overlapping reservations)."""
        group, version = WHEREABOUTS_API
        held = []
        for pool in self.list_objects(group, version, "ippools", namespace="kube-system"):
            if any(pool["metadata"]["name"].startswith(n + "-") for n in network_names):
                held += [
                    f"{pool['metadata']['name']}#{k} {v.get('podref')}"
                    for k, v in (pool["spec"].get("allocations") or {}).items()
                ]
        return held

    def reserved_ips(self, pod_refs: Sequence[str]) -> list[str]:
        group, version = WHEREABOUTS_API
        reservations = self.list_objects(
            group, version, "overlappingrangeipreservations", namespace="kube-system"
        )
        return [r["metadata"]["name"] for r in reservations if r["spec"].get("podref") in pod_refs]
