"""Fixtures of the operator integration tests: a per-test operator namespace bound by the shipped
RBAC, object helpers, and plain Node objects (no kubelet) the policies can select."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed.apiobjects import as_object, items_of
from testbed.bed import TestBed
from testbed.operator import DRIVER_GROUP, DRIVER_VERSION, GROUP, VERSION, Operator, issue_operator_identity
from testbed.waiting import wait_for

DUAL_RAIL = {"networking.example.com/dual-rail": "true"}


class Cluster:
    """Admin-side reads and writes of one test's objects."""

    def __init__(self, testbed: TestBed, namespace: str) -> None:
        self.bed = testbed
        self.ns = namespace
        self.objs = client.CustomObjectsApi(testbed.api_client)
        self.core = client.CoreV1Api(testbed.api_client)
        self.nodes: list[str] = []
        self.namespaces: list[str] = []

    def target_namespace(self, create: bool = True) -> str:
        """A fresh workload namespace for source NADs, deleted after the test."""
        name = f"{self.ns}-t{secrets.token_hex(2)}"
        self.namespaces.append(name)
        if create:
            self.bed.create_namespace(name)
        return name

    def put(self, plural: str, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        ns = namespace or self.ns
        body = {**body, "metadata": {**body["metadata"], "namespace": ns}}
        return as_object(self.objs.create_namespaced_custom_object(GROUP, VERSION, ns, plural, body))

    def get(
        self, plural: str, name: str, namespace: str | None = None, *, driver: bool = False
    ) -> dict[str, Any] | None:
        group, version = (DRIVER_GROUP, DRIVER_VERSION) if driver else (GROUP, VERSION)
        try:
            out = as_object(
                self.objs.get_namespaced_custom_object(group, version, namespace or self.ns, plural, name)
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return out

    def generated(self, plural: str) -> dict[str, dict[str, Any]]:
        listing = self.objs.list_namespaced_custom_object(DRIVER_GROUP, DRIVER_VERSION, self.ns, plural)
        return {o["metadata"]["name"]: o for o in items_of(listing)}

    def nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            out = as_object(
                self.objs.get_namespaced_custom_object(
                    "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions", name
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return out

    def condition(
        self, plural: str, name: str, kind: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        obj = self.get(plural, name, namespace) or {}
        return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)

    def wait_condition(
        self,
        plural: str,
        name: str,
        kind: str,
        reason: str,
        *,
        namespace: str | None = None,
        timeout: float = 20,
    ) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            cond = self.condition(plural, name, kind, namespace)
            return cond if cond and cond["reason"] == reason else None

        try:
            found: dict[str, Any] = wait_for(
                check, timeout, what=f"{plural} {name} {kind} reason {reason}", interval=0.2
            )
        except Exception:
            raise AssertionError(
                f"{plural}/{name}: {self.condition(plural, name, kind, namespace)}"
            ) from None
        return found

    def add_node(self, labels: dict[str, str]) -> str:
        name = f"op-node-{secrets.token_hex(3)}"
        body = {"metadata": {"name": name, "labels": {**labels, "kubernetes.io/hostname": name}}}
        self.core.create_node(client.V1Node.model_validate(body))
        self.nodes.append(name)
        return name

    def node_state(self, node: str, interfaces: list[dict[str, Any]]) -> None:
        self.put(
            "sriovnetworknodestates",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "SriovNetworkNodeState",
                "metadata": {"name": node},
                "spec": {},
            },
        )
        self.objs.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.ns, "sriovnetworknodestates", node, {"status": {"interfaces": interfaces}}
        )

    def operator_config(self, dra: bool) -> None:
        body = {"spec": {"featureGates": {"dynamicResourceAllocation": dra}}}
        try:
            self.objs.patch_namespaced_custom_object(
                GROUP, VERSION, self.ns, "sriovoperatorconfigs", "default", body
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.put(
                "sriovoperatorconfigs",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "SriovOperatorConfig",
                    "metadata": {"name": "default"},
                    **body,
                },
            )


def pf(name: str, pci: str, vfs: int) -> dict[str, Any]:
    bus = pci.rsplit(":", 1)[0]
    return {
        "name": name,
        "pciAddress": pci,
        "vendor": "15b3",
        "deviceID": "1017",
        "linkType": "ETH",
        "numVfs": vfs,
        "totalvfs": 8,
        "Vfs": [{"pciAddress": f"{bus}:00.{i + 2}", "vfID": i, "deviceID": "1018"} for i in range(vfs)],
    }


INTERFACES = [pf("ens1f0", "0000:03:00.0", 2), pf("ens2f0", "0000:04:00.0", 2)]


def network(
    name: str, target: str | None, ipam: str = '{"type": "host-local", "subnet": "10.9.0.0/24"}'
) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceName": "sriov_vfs", "ipam": ipam}
    if target:
        spec["networkNamespace"] = target
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SriovNetwork",
        "metadata": {"name": name},
        "spec": spec,
    }


def rail_policy(name: str, pf_name: str, net: str | None, ns: str, **extra: Any) -> dict[str, Any]:
    dra: dict[str, Any] = {"attributes": {}}
    if net:
        dra["attributes"] = {
            "sriovnetwork.openshift.io/sriovNetworkName": {"string": net},
            "sriovnetwork.openshift.io/sriovNetworkNamespace": {"string": ns},
        }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": name},
        "spec": {
            "resourceName": "sriov_vfs",
            "nodeSelector": dict(DUAL_RAIL),
            "priority": 99,
            "numVfs": 2,
            "nicSelector": {"vendor": "15b3", "pfNames": [pf_name]},
            "deviceType": "netdevice",
            "linkType": "eth",
            "dra": dra,
            **extra,
        },
    }


@pytest.fixture
def operator_namespace(testbed: TestBed) -> Iterator[str]:
    """A fresh, short operator namespace: its ServiceAccount's user name is the client
    certificate's CN, which may not exceed 64 characters."""
    name = testbed.create_namespace(f"op-{secrets.token_hex(3)}")
    yield name
    try:
        client.CoreV1Api(testbed.api_client).delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def cluster(testbed: TestBed, operator_namespace: str) -> Iterator[Cluster]:
    c = Cluster(testbed, operator_namespace)
    yield c
    for ns in c.namespaces:
        try:
            c.core.delete_namespace(ns)
        except ApiException as exc:
            if exc.status != 404:
                raise
    for node in c.nodes:
        try:
            c.core.delete_node(node)
        except ApiException as exc:
            if exc.status != 404:
                raise
    # Cluster-scoped: the next test's operator must not find this one's extended-resource classes.
    generated = "sriovnetwork.openshift.io/generated-by=sriov-network-operator"
    for dc in items_of(
        c.objs.list_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", label_selector=generated)
    ):
        try:
            c.objs.delete_cluster_custom_object(
                "resource.k8s.io", "v1", "deviceclasses", dc["metadata"]["name"]
            )
        except ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture
def operator_identity(testbed: TestBed, operator_namespace: str) -> str:
    return issue_operator_identity(testbed, operator_namespace)


@pytest.fixture
def start_operator(
    testbed: TestBed, operator_namespace: str, operator_identity: str, tmp_path: Path
) -> Iterator[Callable[..., Operator]]:
    started: list[Operator] = []

    def start(*args: str, kubeconfig: Path | None = None) -> Operator:
        op = Operator(
            kubeconfig or testbed.kubeconfig_for(operator_identity),
            operator_namespace,
            tmp_path / f"operator-{len(started)}.log",
            *args,
        )
        op.start()
        started.append(op)
        return op

    yield start
    for op in started:
        op.stop()
