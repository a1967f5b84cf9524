"""Managed bindings end to end: the real driver process under exactly the shipped RBAC, the real
API server, scheduler, garbage collector and resourceclaim controller, the fake SR-IOV node and
the fake kubelet dialing the driver's real sockets."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from sriov_contract.keys import PROTECTION_FINALIZER
from testbed import faults
from testbed.claims import NO_IMAGE, allocated_claim, create_pod, custom_objects, wait_reserved
from testbed.managed_driver import (
    IDENTITY,
    NAD,
    NADS,
    binding_of,
    discard,
    get_pod,
    pod_networks,
    put_nad,
    set_finalizers,
    shadows,
    sriov_config,
    start_agent,
)
from testbed.node_agent import DRIVER, wait_published
from testbed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.usefixtures("released_workloads")]

# -- tests ---------------------------------------------------------------------------------------


def test_one_nad_through_deviceclass_in_two_namespaces_with_frozen_bytes(
    managed_agent, testbed, k8s_namespace, second_namespace, policies, classes
) -> None:
    """Spec 14.1: one NAD via DeviceClass VfConfig, in two Pod namespaces: an explicit-namespace
    reference (a source in a third namespace) and a name-only one (resolved in the Pod's)."""
    ns_a, ns_b, src = k8s_namespace, second_namespace, classes.source_namespace
    put_nad(testbed, src, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    put_nad(testbed, ns_b, "rail-a-net", sriov_config("local", "198.51.100.0/24"))
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
    put_nad(testbed, src, "rail-a-net", sriov_config("ai-rail-a", "203.0.113.0/24"))
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
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
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
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-workloads-rail-a", "192.0.2.0/24"))
    put_nad(testbed, ns, "rail-b-net", sriov_config("ai-workloads-rail-b", "198.51.100.0/24"))
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
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    managed_agent.env["KUBECONFIG"] = str(proxy.kubeconfig)
    start_agent(managed_agent, policies)
    claim = allocated_claim(testbed, ns, classes.name_only, "c")
    uid = claim["metadata"]["uid"]

    proxy.add_rule(faults.response_lost(), verb="create", resource="network-attachment-definitions", times=1)
    proxy.add_rule(faults.forbidden(), verb="patch", resource="pods", times=1)
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
    proxy.add_rule(faults.invalid(), verb="patch", resource="network-attachment-definitions", times=1)
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
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
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

    assert shadows(testbed, ns) == [] and managed_agent.records() == {}
    assert {
        vf.pci: managed_agent.fake_node.driver_of(vf.pci) for vf in managed_agent.fake_node.vfs
    } == drivers
    assert list(managed_agent.dirs.cdi.iterdir()) == []


def test_an_extended_resource_pod_gets_a_managed_vf_through_the_schedulers_claim(
    managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    """DRAExtendedResource: the Pod asks in resources.limits only; the scheduler makes the claim and
    names it in the Pod's status.extendedResourceClaimStatus, which is how the driver reaches it."""
    ns = k8s_namespace
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(managed_agent, policies)
    core = client.CoreV1Api(testbed.api_client)
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
    out = managed_agent.prepare(claim)
    assert out.error == "", out.error
    (shadow,) = shadows(testbed, ns)
    pod = get_pod(testbed, ns, "extended")
    binding = binding_of(shadow)
    assert (binding.pod_uid, binding.claim_uid) == (pod["metadata"]["uid"], claim["metadata"]["uid"])
    assert (binding.source.name, binding.interface) == ("rail-a-net", "dra0")
    nets, _registry = pod_networks(testbed, ns, "extended")
    assert nets == [{"name": shadow["metadata"]["name"], "namespace": ns, "interface": "dra0"}]

    assert managed_agent.unprepare(claim) == ""
    assert shadows(testbed, ns) == [] and managed_agent.records() == {}
    assert pod_networks(testbed, ns, "extended") == ([], None)
    discard(testbed, ns, pod="extended")
