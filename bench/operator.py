"""Reconcile cost of the node-policy controller: one full pass over P policies on N nodes, then a
no-op pass (target: zero writes), counted per API call in process against the real API server.

Every policy references its own SriovNetwork (Ready, with its rendered source NAD) and selects
its own PF, present on every node, so nothing overlaps and every pass resolves all references.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from kubernetes import client

from sriov_operator.controllers.nodepolicy import NodePolicyController
from sriov_operator.core.sourcenad import desired_nad
from sriov_operator.kube.api import OperatorApi
from testbed.apiobjects import as_object
from testbed.bed import TestBed

GROUP, VERSION = "sriovnetwork.openshift.io", "v1"
WRITES = ("create", "replace", "delete", "apply_condition", "create_event")


class Counting:
    """The API adapter with every call counted by method name."""

    def __init__(self, inner: OperatorApi) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        target = getattr(self._inner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return target(*args, **kwargs)

        return counted


def _setup(bed: TestBed, ns: str, policies: int, nodes: int) -> list[str]:
    objs = client.CustomObjectsApi(bed.api_client)
    core = client.CoreV1Api(bed.api_client)
    bed.create_namespace(ns)
    objs.create_namespaced_custom_object(
        GROUP, VERSION, ns, "sriovoperatorconfigs",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SriovOperatorConfig", "metadata": {"name": "default"},
         "spec": {"featureGates": {"dynamicResourceAllocation": True}}},
    )  # fmt: skip
    interfaces = [
        {"name": f"pf{i}", "pciAddress": f"0000:{i + 1:02x}:00.0", "vendor": "15b3", "deviceID": "1017",
         "linkType": "ETH", "Vfs": [{"pciAddress": f"0000:{i + 1:02x}:00.2", "vfID": 0, "deviceID": "1018"}]}
        for i in range(policies)
    ]  # fmt: skip
    names = []
    for n in range(nodes):
        name = f"bench-op-{secrets.token_hex(3)}"
        core.create_node(
            client.V1Node.model_validate(
                {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "bench": ns}}}
            )
        )
        names.append(name)
        objs.create_namespaced_custom_object(
            GROUP, VERSION, ns, "sriovnetworknodestates",
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SriovNetworkNodeState", "metadata": {"name": name}, "spec": {}},
        )  # fmt: skip
        objs.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "sriovnetworknodestates", name, {"status": {"interfaces": interfaces}}
        )
        del n
    for i in range(policies):
        net = as_object(objs.create_namespaced_custom_object(
            GROUP, VERSION, ns, "sriovnetworks",
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SriovNetwork", "metadata": {"name": f"net-{i}"},
             "spec": {"resourceName": "sriov_vfs", "ipam": '{"type":"host-local","subnet":"10.1.0.0/24"}'}},
        ))  # fmt: skip
        objs.create_namespaced_custom_object(
            "k8s.cni.cncf.io", "v1", ns, "network-attachment-definitions", desired_nad(net, "openshift.io")
        )
        ready = {"type": "Ready", "status": "True", "reason": "NetworkReady", "message": "bench",
                 "observedGeneration": net["metadata"]["generation"], "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
        objs.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "sriovnetworks", f"net-{i}", {"status": {"conditions": [ready]}}
        )
        objs.create_namespaced_custom_object(
            GROUP, VERSION, ns, "sriovnetworknodepolicies",
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SriovNetworkNodePolicy", "metadata": {"name": f"policy-{i}"},
             "spec": {"resourceName": "sriov_vfs", "nodeSelector": {"bench": ns}, "numVfs": 1,
                      "nicSelector": {"vendor": "15b3", "pfNames": [f"pf{i}"]},
                      "dra": {"attributes": {"sriovnetwork.openshift.io/sriovNetworkName": {"string": f"net-{i}"},
                                             "sriovnetwork.openshift.io/sriovNetworkNamespace": {"string": ns},
                                             "example.com/rail": {"int": i}}}}},
        )  # fmt: skip
    return names


def measure(bed: TestBed, policies: int = 50, nodes: int = 20) -> dict[str, Any]:
    ns = f"bench-op-{secrets.token_hex(3)}"
    names = _setup(bed, ns, policies, nodes)
    core = client.CoreV1Api(bed.api_client)
    try:
        api = Counting(OperatorApi(bed.api_client))
        controller = NodePolicyController(
            api, operator_namespace=ns, policy_namespace=ns, prefix="openshift.io"
        )
        out: dict[str, Any] = {"policies": policies, "nodes": nodes}
        for label in ("full", "no-op"):
            api.calls.clear()
            start = time.monotonic()
            assert controller.reconcile(), f"the {label} pass did not complete"
            seconds = time.monotonic() - start
            calls = dict(api.calls)
            out[label] = {
                "seconds": round(seconds, 3),
                "requests": sum(calls.values()),
                "writes": sum(v for k, v in calls.items() if k in WRITES),
                "by_call": calls,
            }
        return out
    finally:
        core.delete_namespace(ns)
        for name in names:
            core.delete_node(name)


def report(result: dict[str, Any]) -> None:
    print(f"  node-policy reconcile, {result['policies']} policies on {result['nodes']} nodes:")
    for label in ("full", "no-op"):
        r = result[label]
        print(
            f"    {label:6s} {r['seconds'] * 1000:8.0f} ms  {r['requests']:4d} requests  {r['writes']:4d} writes"
        )
