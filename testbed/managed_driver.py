"""The driver in managed mode (MULTUS_AUTO_ATTACH) under exactly the shipped RBAC: its identity,
DeviceClasses and policies for the managed suites, the source and shadow NADs, and the cleanup
a bed without a kubelet needs."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract.binding import parse_binding
from sriov_contract.keys import BINDING_ANNOTATION, NETWORKS_ANNOTATION, REGISTRY_ANNOTATION
from sriov_contract.registry import parse_registry
from testbed.apiobjects import as_object, items_of, name_of
from testbed.bed import TestBed
from testbed.claims import claim_ref, custom_objects
from testbed.deployment import BASE_DIR, DRIVER_NAMESPACE, DRIVER_SA, load_documents, service_account_user
from testbed.fake_kubelet import FakeKubelet, KubeletDirs
from testbed.fakenode import FakeNode
from testbed.node_agent import DRIVER, Agent, put_attributes, put_policy, wait_published
from testbed.waiting import wait_for

IDENTITY = "managed-driver"
NAD = ("k8s.cni.cncf.io", "v1")
NADS = "network-attachment-definitions"


def sriov_config(name: str, subnet: str) -> str:
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": name,
            "type": "sriov",
            "ipam": {"type": "host-local", "subnet": subnet},
        }
    )


def issue_shipped_rbac_identity(testbed: TestBed) -> str:
    """A client identity that authenticates as the driver's ServiceAccount, bound only by
    deploy/base/driver-rbac.yaml as shipped (ClusterRole + policy Role in dra-driver-sriov)."""
    core = client.CoreV1Api(testbed.api_client)
    try:
        core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": DRIVER_NAMESPACE}}))
    except ApiException as exc:
        if exc.status != 409:
            raise
    user, groups = service_account_user(DRIVER_NAMESPACE, DRIVER_SA)
    testbed.issue_identity(IDENTITY, user, groups)
    testbed.apply(load_documents(BASE_DIR / "driver-rbac.yaml"))
    sa = testbed.client_for(IDENTITY)
    try:
        wait_for(
            lambda: (
                client.CustomObjectsApi(sa).list_namespaced_custom_object(
                    DRIVER, "v1alpha1", DRIVER_NAMESPACE, "sriovresourcepolicies"
                )
                and client.CoreV1Api(sa).read_node(testbed.node_name)
            ),
            30,
            what="the shipped driver RBAC to take effect",
            ignore=(ApiException,),
        )
    finally:
        sa.close()
    return IDENTITY


class Classes:
    """DeviceClasses created once per session: the scheduler reacts slowly to a class created just
    before the Pod that needs it, so tests never race a fresh class."""

    def __init__(self, testbed: TestBed, source_namespace: str) -> None:
        self.source_namespace = source_namespace
        self.made: list[tuple[str, str]] = []
        vfs = f"device.driver == '{DRIVER}'"
        self.explicit = device_class(
            testbed, self.made, vfs, netAttachDefName="rail-a-net", netAttachDefNamespace=source_namespace
        )
        self.name_only = device_class(testbed, self.made, vfs, netAttachDefName="rail-a-net")
        self.bare = device_class(testbed, self.made, vfs)
        self.extended_resource = f"example.com/managed-vf-{secrets.token_hex(3)}"
        self.extended = device_class(
            testbed, self.made, vfs, extended_resource=self.extended_resource, netAttachDefName="rail-a-net"
        )
        self.nic = device_class(
            testbed,
            self.made,
            f'device.driver == "{DRIVER}" && "resource.kubernetes.io" in device.attributes && '
            '"pcieRoot" in device.attributes["resource.kubernetes.io"]',
        )
        self.gpu = device_class(
            testbed,
            self.made,
            'device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"',
        )


def set_finalizers(testbed: TestBed, ns: str, name: str, finalizers: list[str]) -> None:
    # A merge patch: the custom-objects client sends lists as merge patches, not JSON Patches.
    custom_objects(testbed).patch_namespaced_custom_object(
        *NAD, ns, NADS, name, {"metadata": {"finalizers": finalizers}}
    )


def discard(testbed: TestBed, ns: str, *, pod: str = "", claim: str = "") -> None:
    """Force a Pod out and delete a claim, so its devices return to the scheduler promptly."""
    try:
        if pod:
            client.CoreV1Api(testbed.api_client).delete_namespaced_pod(pod, ns, grace_period_seconds=0)
        if claim:
            custom_objects(testbed).delete_namespaced_custom_object(
                "resource.k8s.io", "v1", ns, "resourceclaims", claim
            )
    except ApiException as exc:
        if exc.status != 404:
            raise


def release_workloads(testbed: TestBed, ns: str) -> None:
    """Without a kubelet nothing confirms Pod termination, so a namespace with bound Pods never
    goes away and their claims keep the VFs allocated for later tests: force the Pods out, and
    drop any protection a failed test left on shadows."""
    core = client.CoreV1Api(testbed.api_client)
    for pod in core.list_namespaced_pod(ns).items:
        discard(testbed, ns, pod=name_of(pod))
    for claim in items_of(
        custom_objects(testbed).list_namespaced_custom_object("resource.k8s.io", "v1", ns, "resourceclaims")
    ):
        discard(testbed, ns, claim=claim["metadata"]["name"])
    for shadow in shadows(testbed, ns):
        if shadow["metadata"].get("finalizers"):
            set_finalizers(testbed, ns, shadow["metadata"]["name"], [])


class Policies:
    """Policy objects in the driver namespace with per-test names, removed after the test."""

    def __init__(self, testbed: TestBed) -> None:
        self.testbed = testbed
        self.made: list[tuple[str, str]] = []
        self.tag = secrets.token_hex(3)

    def policy(self, name: str, spec: dict[str, Any]) -> None:
        put_policy(self.testbed, DRIVER_NAMESPACE, f"{name}-{self.tag}", spec)
        self.made.append(("sriovresourcepolicies", f"{name}-{self.tag}"))

    def attributes(self, name: str, labels: dict[str, str], attributes: dict[str, Any]) -> None:
        put_attributes(self.testbed, DRIVER_NAMESPACE, f"{name}-{self.tag}", labels, attributes)
        self.made.append(("deviceattributes", f"{name}-{self.tag}"))

    def cleanup(self) -> None:
        for plural, name in self.made:
            custom_objects(self.testbed).delete_namespaced_custom_object(
                DRIVER, "v1alpha1", DRIVER_NAMESPACE, plural, name
            )


class ManagedAgent(Agent):
    def __init__(
        self, testbed: TestBed, fake_node: FakeNode, dirs: KubeletDirs, factory: Callable[..., FakeKubelet]
    ) -> None:
        super().__init__(testbed, DRIVER_NAMESPACE, fake_node.sysfs_root, dirs)
        self.env["KUBECONFIG"] = str(testbed.kubeconfig_for(IDENTITY))
        self.env["MULTUS_AUTO_ATTACH"] = "true"
        self.testbed = testbed
        self.fake_node = fake_node
        self.factory = factory
        self.kubelet: Any = None

    def start_and_register(self, kubeconfig: Any = None) -> None:
        if kubeconfig is not None:
            self.env["KUBECONFIG"] = str(kubeconfig)
        self.start()
        self.kubelet = self.factory(self.dirs.registry, timeout=30)
        self.kubelet.register()

    def prepare(self, claim: dict[str, Any]) -> Any:
        return self.kubelet.prepare([claim_ref(claim)])[claim["metadata"]["uid"]]

    def unprepare(self, claim: dict[str, Any]) -> str:
        return str(self.kubelet.unprepare([claim_ref(claim)])[claim["metadata"]["uid"]].error)

    def records(self) -> Any:
        if not self.checkpoint.exists():
            return {}
        return json.loads(self.checkpoint.read_text())["data"]["claims"]


def put_nad(testbed: TestBed, namespace: str, name: str, config: str) -> None:
    testbed.apply(
        [
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"config": config},
            }
        ]
    )


def shadows(testbed: TestBed, namespace: str) -> list[dict[str, Any]]:
    return [
        n
        for n in items_of(custom_objects(testbed).list_namespaced_custom_object(*NAD, namespace, NADS))
        if n["metadata"]["name"].startswith("dra-sriov-")
    ]


def get_pod(testbed: TestBed, namespace: str, name: str) -> dict[str, Any]:
    return as_object(
        testbed.api_client.sanitize_for_serialization(
            client.CoreV1Api(testbed.api_client).read_namespaced_pod(name, namespace)
        )
    )


def pod_networks(testbed: TestBed, namespace: str, name: str) -> tuple[list[dict[str, Any]], Any]:
    annotations = get_pod(testbed, namespace, name)["metadata"].get("annotations") or {}
    nets = json.loads(annotations[NETWORKS_ANNOTATION]) if NETWORKS_ANNOTATION in annotations else []
    registry = (
        parse_registry(annotations[REGISTRY_ANNOTATION]) if REGISTRY_ANNOTATION in annotations else None
    )
    return nets, registry


def device_class(
    testbed: TestBed,
    made: list[tuple[str, str]],
    selector: str,
    *,
    extended_resource: str = "",
    **vf_config: str,
) -> str:
    name = f"managed-{secrets.token_hex(3)}"
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": selector}}]}
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    if vf_config:
        spec["config"] = [
            {
                "opaque": {
                    "driver": DRIVER,
                    "parameters": {"apiVersion": f"{DRIVER}/v1alpha1", "kind": "VfConfig", **vf_config},
                }
            }
        ]
    testbed.apply(
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": spec,
            }
        ]
    )
    made.append(("deviceclasses", name))
    return name


def start_agent(
    agent: ManagedAgent, policies: Policies, rails: tuple[str, ...] = ("rail-a", "rail-b")
) -> None:
    """Advertise the VFs of `rails` (both by default: the template comes from the class, and
    other suites' Pods, which nothing terminates without a kubelet, may still hold some VFs)."""
    vfs = [vf for rail in rails for vf in agent.fake_node.rail_vfs(rail)]
    pfs = sorted({vf.pf for vf in vfs})
    policies.policy("vfs", {"configs": [{"resourceFilters": [{"pfNames": pfs}]}]})
    agent.start_and_register()
    names = {v.pci.replace(":", "-").replace(".", "-") for v in vfs}
    wait_published(agent.testbed, lambda p: set(p) == names, f"{', '.join(rails)} VFs advertised")


def binding_of(shadow: dict[str, Any]) -> Any:
    return parse_binding(shadow["metadata"]["annotations"][BINDING_ANNOTATION])
