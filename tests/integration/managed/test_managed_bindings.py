"""Managed bindings end to end: the real driver process under exactly the shipped RBAC, the real
API server, scheduler, garbage collector and resourceclaim controller, the fake SR-IOV node and
the fake kubelet dialing the driver's real sockets."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract.binding import parse_binding
from sriov_contract.keys import (
    BINDING_ANNOTATION,
    NETWORKS_ANNOTATION,
    PROTECTION_FINALIZER,
    REGISTRY_ANNOTATION,
)
from sriov_contract.registry import parse_registry
from tests.bed import faultproxy
from tests.bed.apiobjects import as_object, items_of, name_of
from tests.bed.bed import TestBed
from tests.bed.claims import NO_IMAGE, allocated_claim, claim_ref, create_pod, custom_objects, wait_reserved
from tests.bed.waiting import wait_for
from tests.integration.driver.test_node_agent import (
    Agent,
    put_attributes,
    put_policy,
    wait_published,
)
from tests.support.deploy import DEPLOY_DIR, DRIVER_NAMESPACE, DRIVER_SA, load_documents, service_account_user

pytestmark = [pytest.mark.integration, pytest.mark.netns]

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"
IDENTITY = "managed-driver"
NAD = ("k8s.cni.cncf.io", "v1")
NADS = "network-attachment-definitions"


def _sriov_config(name: str, subnet: str) -> str:
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": name,
            "type": "sriov",
            "ipam": {"type": "host-local", "subnet": subnet},
        }
    )


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def shipped_rbac_identity(testbed) -> str:
    """A client identity that authenticates as the driver's ServiceAccount, bound only by
    deploy/driver-rbac.yaml as shipped (ClusterRole + policy Role in dra-driver-sriov)."""
    core = client.CoreV1Api(testbed.api_client)
    try:
        core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": DRIVER_NAMESPACE}}))
    except ApiException as exc:
        if exc.status != 409:
            raise
    user, groups = service_account_user(DRIVER_NAMESPACE, DRIVER_SA)
    testbed.issue_identity(IDENTITY, user, groups)
    testbed.apply(load_documents(DEPLOY_DIR / "driver-rbac.yaml"))
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

    def __init__(self, testbed, source_namespace: str) -> None:
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


@pytest.fixture(scope="session")
def classes(testbed) -> Iterator[Classes]:
    core = client.CoreV1Api(testbed.api_client)
    source_ns = f"managed-sources-{secrets.token_hex(3)}"
    core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": source_ns}}))
    made = Classes(testbed, source_ns)
    yield made
    for plural, name in made.made:
        custom_objects(testbed).delete_cluster_custom_object("resource.k8s.io", "v1", plural, name)
    core.delete_namespace(source_ns)


def set_finalizers(testbed, ns: str, name: str, finalizers: list[str]) -> None:
    # A merge patch: the custom-objects client sends lists as merge patches, not JSON Patches.
    custom_objects(testbed).patch_namespaced_custom_object(
        *NAD, ns, NADS, name, {"metadata": {"finalizers": finalizers}}
    )


def discard(testbed, ns: str, *, pod: str = "", claim: str = "") -> None:
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


def release_workloads(testbed, ns: str) -> None:
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


@pytest.fixture(autouse=True)
def _release_test_namespace(testbed, k8s_namespace) -> Iterator[None]:
    yield
    release_workloads(testbed, k8s_namespace)


@pytest.fixture
def second_namespace(testbed) -> Iterator[str]:
    name = testbed.create_namespace(f"managed-b-{secrets.token_hex(3)}")
    yield name
    release_workloads(testbed, name)
    client.CoreV1Api(testbed.api_client).delete_namespace(name)


class Policies:
    """Policy objects in the driver namespace with per-test names, removed after the test."""

    def __init__(self, testbed) -> None:
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


@pytest.fixture
def policies(testbed) -> Iterator[Policies]:
    p = Policies(testbed)
    yield p
    p.cleanup()


@pytest.fixture
def managed_agent(
    testbed, shipped_rbac_identity, fake_node, kubelet_dirs, fake_kubelet_factory
) -> Iterator[ManagedAgent]:
    a = ManagedAgent(testbed, fake_node, kubelet_dirs, fake_kubelet_factory)
    yield a
    a.stop()
    print(a.output()[-6000:])


class ManagedAgent(Agent):
    def __init__(self, testbed, fake_node, dirs, factory) -> None:
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


# -- API helpers ---------------------------------------------------------------------------------


def put_nad(testbed, namespace: str, name: str, config: str) -> None:
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


def shadows(testbed, namespace: str) -> list[dict[str, Any]]:
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


def pod_networks(testbed, namespace: str, name: str) -> tuple[list[dict[str, Any]], Any]:
    annotations = get_pod(testbed, namespace, name)["metadata"].get("annotations") or {}
    nets = json.loads(annotations[NETWORKS_ANNOTATION]) if NETWORKS_ANNOTATION in annotations else []
    registry = (
        parse_registry(annotations[REGISTRY_ANNOTATION]) if REGISTRY_ANNOTATION in annotations else None
    )
    return nets, registry


def device_class(
    testbed, made: list[tuple[str, str]], selector: str, *, extended_resource: str = "", **vf_config: str
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


# -- tests ---------------------------------------------------------------------------------------


def test_one_nad_through_deviceclass_in_two_namespaces_with_frozen_bytes(
    managed_agent, testbed, k8s_namespace, second_namespace, policies, classes
) -> None:
    """Spec 14.1: one NAD via DeviceClass VfConfig, in two Pod namespaces: an explicit-namespace
    reference (a source in a third namespace) and a name-only one (resolved in the Pod's)."""
    ns_a, ns_b, src = k8s_namespace, second_namespace, classes.source_namespace
    put_nad(testbed, src, "rail-a-net", _sriov_config("ai-rail-a", "192.0.2.0/24"))
    put_nad(testbed, ns_b, "rail-a-net", _sriov_config("local", "198.51.100.0/24"))
    start_agent(managed_agent, policies)

    ca = allocated_claim(testbed, ns_a, classes.explicit, "ca")
    cb = allocated_claim(testbed, ns_b, classes.name_only, "cb")
    for claim, ns, source_ns in ((ca, ns_a, src), (cb, ns_b, ns_b)):
        out = managed_agent.prepare(claim)
        assert out.error == "", out.error
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert [d.device_name for d in out.devices] == [result["device"]]
        (shadow,) = shadows(testbed, ns)
        binding = binding_of(shadow)
        pod = get_pod(testbed, ns, f"pod-{claim['metadata']['name']}")
        assert (binding.source.namespace, binding.source.name) == (source_ns, "rail-a-net")
        assert binding.pod_uid == pod["metadata"]["uid"] and binding.node_uid == testbed.node_uid
        vf = managed_agent.fake_node.vf(binding.pci_address)
        assert vf.rail in ("rail-a", "rail-b")
        config = json.loads(shadow["spec"]["config"])
        assert config["deviceID"] == vf.pci
        md = shadow["metadata"]
        assert md["finalizers"] == [PROTECTION_FINALIZER]
        assert md["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
                "blockOwnerDeletion": False,
            }
        ]
        nets, registry = pod_networks(testbed, ns, pod["metadata"]["name"])
        assert nets == [{"name": md["name"], "namespace": ns, "interface": "dra0"}]
        assert [(e.uid, e.claim_uid) for e in registry.entries] == [(md["uid"], claim["metadata"]["uid"])]
        record = managed_agent.records()[claim["metadata"]["uid"]]
        assert record["devices"][0]["managedBinding"]["phase"] == "Ready"

    # the sources change or disappear; prepared bindings keep their frozen bytes
    frozen = {ns: shadows(testbed, ns)[0]["spec"]["config"] for ns in (ns_a, ns_b)}
    put_nad(testbed, src, "rail-a-net", _sriov_config("ai-rail-a", "203.0.113.0/24"))
    custom_objects(testbed).delete_namespaced_custom_object(*NAD, ns_b, NADS, "rail-a-net")
    for claim in (ca, cb):
        assert managed_agent.prepare(claim).error == ""
    managed_agent.stop()
    managed_agent.start_and_register()  # and across a driver restart
    for claim in (ca, cb):
        assert managed_agent.prepare(claim).error == ""
    assert {ns: shadows(testbed, ns)[0]["spec"]["config"] for ns in (ns_a, ns_b)} == frozen

    for claim, ns in ((ca, ns_a), (cb, ns_b)):
        assert managed_agent.unprepare(claim) == ""
        assert shadows(testbed, ns) == []
        assert pod_networks(testbed, ns, f"pod-{claim['metadata']['name']}") == ([], None)
    assert managed_agent.records() == {}
    assert list(managed_agent.dirs.cdi.iterdir()) == []


def test_pod_deleted_before_unprepare_gc_and_finalizer_then_claim_reuse(
    managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    """Spec 6.2: GC marks the shadow for deletion when the Pod goes; our finalizer keeps it until
    kubelet's unprepare releases it. The claim is then reused by a new Pod, with a new identity."""
    ns = k8s_namespace
    cls = classes.name_only
    put_nad(testbed, ns, "rail-a-net", _sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(managed_agent, policies)
    claim = allocated_claim(testbed, ns, cls, "c", pod_name="first")
    assert managed_agent.prepare(claim).error == ""
    (shadow,) = shadows(testbed, ns)

    client.CoreV1Api(testbed.api_client).delete_namespaced_pod("first", ns, grace_period_seconds=0)
    held = wait_for(
        lambda: next((s for s in shadows(testbed, ns) if s["metadata"].get("deletionTimestamp")), None),
        60,
        what="the garbage collector to delete the orphaned shadow (held by our finalizer)",
    )
    assert held["metadata"]["uid"] == shadow["metadata"]["uid"]
    assert held["metadata"]["finalizers"] == [PROTECTION_FINALIZER]

    # a new Pod takes the claim before kubelet unprepared it for the old one
    create_pod(testbed, ns, "second", [{"name": "vfs", "resourceClaimName": "c"}])
    claim = wait_reserved(testbed, ns, "c", "second")
    out = managed_agent.prepare(claim)
    assert out.error.startswith("ClaimReleaseInProgress:"), out.error

    assert managed_agent.unprepare(claim) == ""
    wait_for(lambda: shadows(testbed, ns) == [], 30, what="the released shadow to disappear")
    assert managed_agent.records() == {}

    out = managed_agent.prepare(claim)
    assert out.error == "", out.error
    (again,) = shadows(testbed, ns)
    assert again["metadata"]["name"] != shadow["metadata"]["name"]
    assert binding_of(again).pod_uid == get_pod(testbed, ns, "second")["metadata"]["uid"]
    assert managed_agent.unprepare(claim) == ""


def test_two_rails_through_device_attributes_with_gpu_pairs(
    managed_agent, testbed, k8s_namespace, policies, classes, gpu_slices
) -> None:
    """Spec 14.2: a template claim with two GPU/NIC pairs on the same PCIe root; each VF picks its
    rail's source NAD from DeviceAttributes; the GPU results belong to another driver."""
    ns, node = k8s_namespace, managed_agent.fake_node
    tag = policies.tag
    configs = []
    for rail in ("rail-a", "rail-b"):
        label = {"networking.example.com/template": f"{rail}-{tag}"}
        policies.attributes(rail, label, {f"{DRIVER}/netAttachDefName": {"string": f"{rail}-net"}})
        configs.append(
            {
                "deviceAttributesSelector": {"matchLabels": label},
                "resourceFilters": [{"pfNames": [node.rail_vfs(rail)[0].pf]}],
            }
        )
    policies.policy("dual-rail", {"configs": configs})
    put_nad(testbed, ns, "rail-a-net", _sriov_config("ai-workloads-rail-a", "192.0.2.0/24"))
    put_nad(testbed, ns, "rail-b-net", _sriov_config("ai-workloads-rail-b", "198.51.100.0/24"))
    gpu_slices(testbed.node_name, node.gpus)
    managed_agent.start_and_register()
    wait_published(testbed, lambda p: len(p) == len(node.vfs), "both rails advertised")
    requests = [
        {"name": n, "exactly": {"deviceClassName": classes.gpu if n.startswith("gpu") else classes.nic}}
        for n in ("gpu-0", "nic-0", "gpu-1", "nic-1")
    ]
    testbed.apply(
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "gpu-nic-pairs", "namespace": ns},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": requests,
                            "constraints": [
                                {
                                    "requests": ["gpu-0", "nic-0"],
                                    "matchAttribute": "resource.kubernetes.io/pcieRoot",
                                },
                                {
                                    "requests": ["gpu-1", "nic-1"],
                                    "matchAttribute": "resource.kubernetes.io/pcieRoot",
                                },
                            ],
                        }
                    }
                },
            }
        ]
    )
    create_pod(testbed, ns, "pairs", [{"name": "devices", "resourceClaimTemplateName": "gpu-nic-pairs"}])

    def generated():
        statuses = get_pod(testbed, ns, "pairs").get("status", {}).get("resourceClaimStatuses") or []
        return statuses[0].get("resourceClaimName") if statuses else None

    claim = wait_reserved(testbed, ns, wait_for(generated, 60, what="the generated claim"), "pairs")
    results = {r["request"]: r for r in claim["status"]["allocation"]["devices"]["results"]}
    gpu_roots = {g.name: g.pcie_root for g in node.gpus}

    out = managed_agent.prepare(claim)
    assert out.error == "", out.error
    assert sorted(d.device_name for d in out.devices) == sorted(
        results[n]["device"] for n in ("nic-0", "nic-1")
    )
    by_interface = {binding_of(s).interface: binding_of(s) for s in shadows(testbed, ns)}
    assert set(by_interface) == {"dra0", "dra1"}
    for index, request in enumerate(("nic-0", "nic-1")):
        binding = by_interface[f"dra{index}"]
        vf = node.vf(binding.pci_address)
        assert results[request]["device"] == vf.pci.replace(":", "-").replace(".", "-")
        # the pair really shares the GPU's PCIe root, and the VF's rail picked its source NAD
        assert vf.pcie_root == gpu_roots[results[f"gpu-{index}"]["device"]]
        assert binding.source.name == f"{vf.rail}-net"
    nets, registry = pod_networks(testbed, ns, "pairs")
    assert [n["interface"] for n in nets] == ["dra0", "dra1"] and len(registry.entries) == 2

    assert managed_agent.unprepare(claim) == ""
    assert shadows(testbed, ns) == [] and pod_networks(testbed, ns, "pairs") == ([], None)


def test_lost_create_forbidden_patch_422_finalizer_and_foreign_finalizer(
    managed_agent, testbed, k8s_namespace, policies, classes, fault_proxy
) -> None:
    ns = k8s_namespace
    proxy = fault_proxy(identity=IDENTITY)
    put_nad(testbed, ns, "rail-a-net", _sriov_config("ai-rail-a", "192.0.2.0/24"))
    managed_agent.env["KUBECONFIG"] = str(proxy.kubeconfig)
    start_agent(managed_agent, policies)
    claim = allocated_claim(testbed, ns, classes.name_only, "c")
    uid = claim["metadata"]["uid"]

    proxy.add_rule(
        faultproxy.response_lost(), verb="create", resource="network-attachment-definitions", times=1
    )
    proxy.add_rule(faultproxy.forbidden(), verb="patch", resource="pods", times=1)
    out = managed_agent.prepare(claim)
    assert out.error.startswith("AccessDenied:"), out.error
    # the shadow the lost Create made was adopted and the state kept for a forward retry (by
    # kubelet, or by the driver's repair worker, which may already have finished the Pod write)
    creates = proxy.requests_for(verb="create", resource="network-attachment-definitions")
    assert creates[0].fault is not None and creates[0].status == 201
    (shadow,) = shadows(testbed, ns)
    binding = managed_agent.records()[uid]["devices"][0]["managedBinding"]
    assert binding["phase"] in ("Pending", "Ready") and binding["shadowUID"] == shadow["metadata"]["uid"]
    assert pod_networks(testbed, ns, "pod-c")[0] in (
        [],
        [{"name": shadow["metadata"]["name"], "namespace": ns, "interface": "dra0"}],
    )

    out = managed_agent.prepare(claim)
    assert out.error == "", out.error
    assert [s["metadata"]["uid"] for s in shadows(testbed, ns)] == [shadow["metadata"]["uid"]]
    assert managed_agent.records()[uid]["devices"][0]["managedBinding"]["phase"] == "Ready"

    set_finalizers(testbed, ns, shadow["metadata"]["name"], [PROTECTION_FINALIZER, "example.com/keep"])
    proxy.add_rule(faultproxy.invalid(), verb="patch", resource="network-attachment-definitions", times=1)
    assert managed_agent.unprepare(claim) == ""
    (kept,) = shadows(testbed, ns)
    assert kept["metadata"]["finalizers"] == ["example.com/keep"] and kept["metadata"]["deletionTimestamp"]
    assert managed_agent.records() == {}
    # the finalizer patch was refused once with 422, re-read and rebuilt, then applied
    patches = proxy.requests_for(verb="patch", resource="network-attachment-definitions")
    assert [r.fault is not None for r in patches] == [True, False]
    set_finalizers(testbed, ns, shadow["metadata"]["name"], [])
    wait_for(
        lambda: shadows(testbed, ns) == [], 30, what="the shadow to go once the foreign finalizer is removed"
    )


def test_out_of_envelope_claims_are_refused_before_any_vf_is_touched(
    managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    ns = k8s_namespace
    cls = classes.name_only
    put_nad(testbed, ns, "rail-a-net", _sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(managed_agent, policies)
    drivers = {vf.pci: managed_agent.fake_node.driver_of(vf.pci) for vf in managed_agent.fake_node.vfs}

    host = allocated_claim(testbed, ns, cls, "host", host_network=True)
    assert managed_agent.prepare(host).error.startswith("HostNetworkUnsupported:")
    # each refused workload gives its VF back at once: other suites' Pods may hold some
    discard(testbed, ns, pod="pod-host", claim="host")
    shared = allocated_claim(testbed, ns, cls, "shared", pod_name="one")
    create_pod(testbed, ns, "two", [{"name": "vfs", "resourceClaimName": "shared"}])
    shared = wait_reserved(testbed, ns, "shared", "two")
    assert managed_agent.prepare(shared).error.startswith("MultipleConsumersUnsupported:")
    discard(testbed, ns, pod="one", claim="shared")
    discard(testbed, ns, pod="two")
    missing = allocated_claim(testbed, ns, classes.bare, "bare")
    assert managed_agent.prepare(missing).error.startswith("MissingNetworkTemplate:")
    discard(testbed, ns, pod="pod-bare", claim="bare")

    core = client.CoreV1Api(testbed.api_client)
    terminating = allocated_claim(testbed, ns, cls, "term")
    core.delete_namespaced_pod("pod-term", ns)  # graceful: without a kubelet it stays terminating
    assert get_pod(testbed, ns, "pod-term")["metadata"]["deletionTimestamp"]
    assert managed_agent.prepare(terminating).error.startswith("PodTerminating:")
    discard(testbed, ns, pod="pod-term", claim="term")

    core.patch_namespace(ns, {"metadata": {"labels": {"resource.kubernetes.io/admin-access": "true"}}})
    admin = allocated_claim(testbed, ns, cls, "admin", admin_access=True)
    assert managed_agent.prepare(admin).error.startswith("AdminAccessUnsupported:")

    # an extended-resource request: the scheduler makes the claim, the Pod never names it
    limits = {classes.extended_resource: "1"}
    core.create_namespaced_pod(
        ns,
        client.V1Pod.model_validate(
            {
                "metadata": {"name": "extended"},
                "spec": {
                    "containers": [
                        {"name": "c", "image": NO_IMAGE, "resources": {"limits": limits, "requests": limits}}
                    ]
                },
            }
        ),
    )
    extended = wait_for(
        lambda: (
            get_pod(testbed, ns, "extended").get("status", {}).get("extendedResourceClaimStatus") or {}
        ).get("resourceClaimName"),
        60,
        what="the scheduler's extended-resource claim",
    )
    claim = wait_reserved(testbed, ns, extended, "extended")
    assert managed_agent.prepare(claim).error.startswith("UnsupportedManagedClaimKind:")

    assert shadows(testbed, ns) == [] and managed_agent.records() == {}
    assert {
        vf.pci: managed_agent.fake_node.driver_of(vf.pci) for vf in managed_agent.fake_node.vfs
    } == drivers
    assert list(managed_agent.dirs.cdi.iterdir()) == []
