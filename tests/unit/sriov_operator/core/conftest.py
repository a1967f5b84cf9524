"""Builders shared by the operator core tests: objects as the API server returns them."""

from __future__ import annotations

from typing import Any

OPS = "sriov-network-operator"
IPAM_A = '{\n  "type": "whereabouts",\n  "network_name": "ai-workloads-rail-a",\n  "range": "192.0.2.0/24"\n}'


def network(
    name: str = "rail-a-net",
    namespace: str = OPS,
    *,
    generation: int = 1,
    ready: str | None = "True",
    observed: int | None = None,
    uid: str = "net-uid-a",
    **spec: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetwork",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": generation},
        "spec": {"resourceName": "sriov_vfs", "logLevel": "info", **spec},
    }
    if ready is not None:
        obj["status"] = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "NetworkReady",
                    "observedGeneration": generation if observed is None else observed,
                }
            ]
        }
    return obj
