"""Objects the bed creates once the apiserver is ready: the product's CRDs and a schedulable Node.

There is no kubelet, so the Node is a plain API object that the bed marks Ready itself. The
TaintNodesByCondition admission plugin taints every new Node ``not-ready``; the node-lifecycle
controller would lift that, but it must not run here (it would taint the heartbeat-less node
unreachable), so the bed lifts it.
"""

from __future__ import annotations

import datetime as dt
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed.waiting import wait_for

NODE_ALLOCATABLE = {"cpu": "64", "memory": "256Gi", "pods": "110"}


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def install_crds(api: client.ApiClient, crd_dir: Path, timeout: float = 60.0) -> list[str]:
    """Create (or replace) every CRD in ``crd_dir`` and wait until each is Established."""
    ext = client.ApiextensionsV1Api(api)
    names = []
    for path in sorted(crd_dir.glob("*.yaml")):
        for doc in load_documents(path):
            crd = client.V1CustomResourceDefinition.model_validate(doc)
            name = doc["metadata"]["name"]
            try:
                ext.create_custom_resource_definition(crd)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                current = ext.read_custom_resource_definition(name)
                assert crd.metadata is not None and current.metadata is not None
                crd.metadata.resource_version = current.metadata.resource_version
                ext.replace_custom_resource_definition(name, crd)
            names.append(name)

    def established(name: str) -> bool:
        status = ext.read_custom_resource_definition(name).status
        conds = (status.conditions if status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conds)

    for name in names:
        wait_for(partial(established, name), timeout, what=f"CRD {name} to be Established")
    return names


def node_status(now: dt.datetime) -> dict[str, Any]:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "capacity": dict(NODE_ALLOCATABLE),
        "allocatable": dict(NODE_ALLOCATABLE),
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "TestBedNode",
                "message": "simulated node; no kubelet runs on the test bed",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
        ],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "bootID": "",
            "containerRuntimeVersion": "",
            "kernelVersion": "",
            "kubeProxyVersion": "",
            "kubeletVersion": "",
            "machineID": "",
            "osImage": "auto-sriov test bed",
            "systemUUID": "",
        },
    }


def create_node(api: client.ApiClient, name: str) -> str:
    """Create the Ready, untainted Node and return its UID."""
    core = client.CoreV1Api(api)
    body = client.V1Node.model_validate(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            },
        }
    )
    created = core.create_node(body)
    assert created.metadata is not None
    uid = str(created.metadata.uid)
    core.patch_node_status(name, {"status": node_status(dt.datetime.now(dt.UTC))})
    remove_taints(api, name)
    return uid


def remove_taints(api: client.ApiClient, name: str) -> None:
    """The API server's TaintNodesByCondition admission taints a new Node not-ready; the bed runs
    no node-lifecycle controller to lift it once the node is Ready."""
    core = client.CoreV1Api(api)
    spec = core.read_node(name).spec
    if spec is not None and spec.taints:
        core.patch_node(name, [{"op": "remove", "path": "/spec/taints"}])
