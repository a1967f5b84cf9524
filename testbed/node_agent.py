"""One `sriov-dra-driver` process on the fake SR-IOV node against the bed's API server, and the
policy objects and ResourceSlices it works from."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from sriov_contract import keys
from testbed import processes
from testbed.apiobjects import items_of
from testbed.bed import TestBed
from testbed.claims import custom_objects
from testbed.fake_kubelet import KubeletDirs
from testbed.fakenode import FakeNode
from testbed.fakesysfs import DEV_DIR
from testbed.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
DRIVER = keys.DOMAIN
GROUP_VERSION = f"{DRIVER}/v1alpha1"

DRIVER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceslices"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
    {
        "apiGroups": [DRIVER],
        "resources": ["sriovresourcepolicies", "deviceattributes"],
        "verbs": ["get", "list", "watch"],
    },
]


def install_driver_crds(testbed: TestBed) -> None:
    """Our CRDs, established, and the driver's rights to read them (not the shipped RBAC)."""
    docs = [
        yaml.safe_load((REPO / "deploy/base/crds" / f).read_text())
        for f in ("sriovresourcepolicy.yaml", "deviceattributes.yaml")
    ]
    testbed.apply(docs)
    ext = client.ApiextensionsV1Api(testbed.api_client)

    def established(name: str) -> bool:
        status = ext.read_custom_resource_definition(name).status
        conditions = (status.conditions if status else None) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    for doc in docs:
        name = doc["metadata"]["name"]
        wait_for(functools.partial(established, name), 30, what=f"CRD {name} established")
    testbed.grant(testbed.user_of("driver"), DRIVER_RULES)


class Agent(processes.LoggedChild):
    """One sriov-dra-driver process; restartable with the same directories."""

    def __init__(self, testbed: TestBed, namespace: str, sysfs: Path, dirs: KubeletDirs) -> None:
        self.dirs = dirs
        super().__init__(dirs.root / "driver.log")
        self.env = {
            **os.environ,
            "NODE_NAME": testbed.node_name,
            "NAMESPACE": namespace,
            "CDI_ROOT": str(dirs.cdi),
            "KUBELET_REGISTRAR_DIRECTORY_PATH": str(dirs.registry),
            "KUBELET_PLUGINS_DIRECTORY_PATH": str(dirs.plugins),
            "SYSFS_ROOT": str(sysfs),
            "DEV_ROOT": str(sysfs / DEV_DIR),
            "KUBECONFIG": str(testbed.kubeconfig_for("driver")),
            "CONFIGURATION_MODE": "MULTUS",
        }

    @property
    def checkpoint(self) -> Path:
        return self.dirs.plugins / DRIVER / "checkpoint.json"

    def start(self) -> subprocess.Popen[bytes]:
        return self.spawn([str(Path(sys.executable).parent / "sriov-dra-driver")], self.env, REPO)


def put_policy(testbed: TestBed, ns: str, name: str, spec: dict[str, Any]) -> None:
    testbed.apply(
        [
            {
                "apiVersion": GROUP_VERSION,
                "kind": "SriovResourcePolicy",
                "metadata": {"name": name, "namespace": ns},
                "spec": spec,
            }
        ]
    )


def put_attributes(
    testbed: TestBed, ns: str, name: str, labels: dict[str, str], attributes: dict[str, Any]
) -> None:
    testbed.apply(
        [
            {
                "apiVersion": GROUP_VERSION,
                "kind": "DeviceAttributes",
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"attributes": attributes},
            }
        ]
    )


def node_slices(testbed: TestBed) -> list[dict[str, Any]]:
    return items_of(
        custom_objects(testbed).list_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            field_selector=f"spec.nodeName={testbed.node_name},spec.driver={DRIVER}",
        )
    )


def published(testbed: TestBed) -> dict[str, dict[str, Any]]:
    return {
        d["name"]: d.get("attributes") or {}
        for s in node_slices(testbed)
        for d in s["spec"].get("devices") or []
    }


def wait_published(
    testbed: TestBed, predicate: Callable[[dict[str, dict[str, Any]]], bool], what: str, timeout: float = 30
) -> dict[str, dict[str, Any]]:
    def check() -> tuple[dict[str, dict[str, Any]]] | None:
        p = published(testbed)
        return (p,) if predicate(p) else None  # wrapped: an empty dict is a valid, falsy answer

    return wait_for(check, timeout, what=what)[0]


def vf_names(fake_node: FakeNode) -> set[str]:
    return {vf.pci.replace(":", "-").replace(".", "-") for vf in fake_node.vfs}
