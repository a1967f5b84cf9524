"""ResourceClaims and the Pods that consume them, allocated and reserved by the bed's real scheduler.

No kubelet runs these Pods; the scheduler still allocates each claim's devices, reserves the claim
for the Pod and binds the Pod to the node, which is all the driver needs before it can prepare.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from testbed.apiobjects import as_object
from testbed.bed import TestBed
from testbed.waiting import wait_for

RESOURCE_API = ("resource.k8s.io", "v1")
# The image is never pulled: without a kubelet nothing runs the Pod.
NO_IMAGE = "registry.invalid/none:0"


def custom_objects(bed: TestBed) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(bed.api_client)


def create_claim(
    bed: TestBed,
    ns: str,
    name: str,
    device_class: str,
    *,
    count: int = 1,
    admin_access: bool = False,
) -> None:
    """A claim with one request, `vf`, for `count` devices of `device_class`."""
    request: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if admin_access:
        request["adminAccess"] = True
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "vf", "exactly": request}]}},
    }
    custom_objects(bed).create_namespaced_custom_object(*RESOURCE_API, ns, "resourceclaims", body)


def create_pod(
    bed: TestBed, ns: str, name: str, claims: list[dict[str, Any]], *, host_network: bool = False
) -> None:
    """A Pod whose one container uses every entry of `claims` (its `spec.resourceClaims`)."""
    pod = {
        "metadata": {"name": name},
        "spec": {
            "hostNetwork": host_network,
            "containers": [
                {
                    "name": "c",
                    "image": NO_IMAGE,
                    "resources": {"claims": [{"name": c["name"]} for c in claims]},
                }
            ],
            "resourceClaims": claims,
        },
    }
    client.CoreV1Api(bed.api_client).create_namespaced_pod(ns, client.V1Pod.model_validate(pod))


def get_claim(bed: TestBed, ns: str, name: str) -> dict[str, Any]:
    return as_object(
        custom_objects(bed).get_namespaced_custom_object(*RESOURCE_API, ns, "resourceclaims", name)
    )


def wait_reserved(bed: TestBed, ns: str, claim: str, pod: str, timeout: float = 60) -> dict[str, Any]:
    """The claim once it is allocated, reserved for `pod`, and `pod` is bound to a node."""
    core = client.CoreV1Api(bed.api_client)

    def ready() -> dict[str, Any] | None:
        c = get_claim(bed, ns, claim)
        status = c.get("status") or {}
        p = core.read_namespaced_pod(pod, ns)
        reserved = [r["uid"] for r in status.get("reservedFor") or []]
        bound = (
            p.metadata is not None and p.metadata.uid in reserved and p.spec is not None and p.spec.node_name
        )
        return c if status.get("allocation") and bound else None

    return wait_for(ready, timeout, what=f"claim {ns}/{claim} allocated and reserved for Pod {pod}")


def allocated_claim(
    bed: TestBed,
    ns: str,
    device_class: str,
    name: str,
    *,
    count: int = 1,
    pod_name: str | None = None,
    host_network: bool = False,
    admin_access: bool = False,
    timeout: float = 60,
) -> dict[str, Any]:
    """A claim (see `create_claim`) and a Pod using it as `vfs`, allocated and reserved."""
    create_claim(bed, ns, name, device_class, count=count, admin_access=admin_access)
    pod = pod_name or f"pod-{name}"
    create_pod(bed, ns, pod, [{"name": "vfs", "resourceClaimName": name}], host_network=host_network)
    return wait_reserved(bed, ns, name, pod, timeout)


def claim_ref(claim: dict[str, Any]) -> tuple[str, str, str]:
    """(namespace, name, uid): how kubelet names a claim to the driver."""
    md = claim["metadata"]
    return md["namespace"], md["name"], md["uid"]
