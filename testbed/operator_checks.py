"""The checks of the spec 14.3 scenario (testbed/operator_rails.py) beyond 14.4's: the operator's
Ready conditions, the objects it generated for the driver, and that deleting a policy withdraws
its VFs so that a new claim for them fails visibly."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from testbed.deployment import OPERATOR_NAMESPACE
from testbed.driver import DRIVER
from testbed.operator import GROUP, VERSION
from testbed.results import FAIL, Check, check
from testbed.scenario import stop_pod
from testbed.waiting import WaitTimeout, wait_for
from testbed.workloads import WORKLOAD_NS, find, load_examples, pf_renames

if TYPE_CHECKING:
    from testbed.stack import Stack

NETWORKS = ("rail-a-net", "rail-b-net")
POLICIES = ("rail-a-policy", "rail-b-policy")
DRA_READY = "DRAConfigurationReady"
GENERATED_BY = "sriovnetwork.openshift.io/generated-by"
UID_LABEL = "sriovnetwork.openshift.io/node-policy-uid"
POOL_LABEL = "sriovnetwork.openshift.io/resource-pool"
REFERENCE_KEYS = (
    "sriovnetwork.openshift.io/sriovNetworkName",
    "sriovnetwork.openshift.io/sriovNetworkNamespace",
)
NAD_NAME_KEY = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName"
NAD_NS_KEY = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace"
RESOURCE_NAME_KEY = "k8s.cni.cncf.io/resourceName"
READY_TIMEOUT = 60.0
PROBE_POD = "rail-b-after-withdrawal"


def _condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return next((dict(c) for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def _current(obj: Mapping[str, Any], kind: str) -> bool:
    cond = _condition(obj, kind)
    return cond.get("status") == "True" and cond.get("observedGeneration") == obj["metadata"]["generation"]


def wait_ready(stack: Stack) -> Check:
    def objects() -> list[tuple[str, dict[str, Any]]]:
        nets = [
            (
                "Ready",
                stack.cluster.get_object(GROUP, VERSION, "sriovnetworks", n, namespace=OPERATOR_NAMESPACE),
            )
            for n in NETWORKS
        ]
        pols = [
            (
                DRA_READY,
                stack.cluster.get_object(
                    GROUP, VERSION, "sriovnetworknodepolicies", p, namespace=OPERATOR_NAMESPACE
                ),
            )
            for p in POLICIES
        ]
        return nets + pols

    with contextlib.suppress(WaitTimeout):
        wait_for(
            lambda: all(_current(o, k) for k, o in objects()),
            READY_TIMEOUT,
            what="Ready conditions",
            interval=0.25,
        )
    found = objects()
    detail = ", ".join(
        f"{o['metadata']['name']} {k}={_condition(o, k).get('status', '?')}/{_condition(o, k).get('reason', '?')}"
        for k, o in found
    )
    return check(
        "both SriovNetworks Ready=True and both policies DRAConfigurationReady=True, for their current generation",
        all(_current(o, k) for k, o in found),
        detail,
    )


def check_generated(stack: Stack, policies: Mapping[str, Mapping[str, Any]]) -> Check:
    """Spec 14.3's expected operator output, per policy; and the node's configs select exactly it."""
    attrs = {
        o["metadata"]["name"]: o
        for o in stack.cluster.list_objects(
            DRIVER, "v1alpha1", "deviceattributes", namespace=OPERATOR_NAMESPACE
        )
    }
    problems = []
    for policy_name, policy in policies.items():
        uid = policy["metadata"]["uid"]
        network = policy_name.replace("-policy", "-net")
        obj = attrs.get(f"dra-policy-{uid}-attrs")
        if obj is None:
            problems.append(f"{policy_name}: no dra-policy-{uid}-attrs")
            continue
        want = {
            RESOURCE_NAME_KEY: {"string": "openshift.io/sriov_vfs"},
            NAD_NAME_KEY: {"string": network},
            NAD_NS_KEY: {"string": WORKLOAD_NS},
        }
        if obj["spec"]["attributes"] != want:
            problems.append(f"{policy_name}: attributes {obj['spec']['attributes']}")
        labels = obj["metadata"].get("labels") or {}
        if labels != {GENERATED_BY: "sriov-network-operator", UID_LABEL: uid}:
            problems.append(f"{policy_name}: labels {labels}")
    leaked = [k for o in attrs.values() for k in o["spec"]["attributes"] if k in REFERENCE_KEYS]
    pooled = [n for n, o in attrs.items() if POOL_LABEL in (o["metadata"].get("labels") or {})]
    problems += [f"reference key {k} published" for k in leaked] + [
        f"{n} carries the resource-pool label" for n in pooled
    ]
    node_policy = stack.cluster.get_object(
        DRIVER, "v1alpha1", "sriovresourcepolicies", stack.bed.node_name, namespace=OPERATOR_NAMESPACE
    )
    selected = [
        c["deviceAttributesSelector"]["matchLabels"].get(UID_LABEL) for c in node_policy["spec"]["configs"]
    ]
    if sorted(selected) != sorted(p["metadata"]["uid"] for p in policies.values()):
        problems.append(f"node configs select {selected}")
    return check(
        "the generated objects match spec 14.3: one dra-policy-<UID>-attrs per policy with its own NAD pair "
        "(no sriovNetwork* keys, no resource-pool label), each selected by its policy UID",
        not problems,
        "; ".join(problems) or ", ".join(sorted(attrs)),
    )


def withdraw_policy(stack: Stack, policy: str) -> tuple[Check, Check]:
    """Delete one policy: its VFs leave the ResourceSlice, and a new claim for them fails."""
    pf = next(p for p in stack.fake_node.pfs if p.netdev == pf_renames(stack.fake_node)["ens2f0"])
    stack.cluster.objects.delete_namespaced_custom_object(
        GROUP, VERSION, OPERATOR_NAMESPACE, "sriovnetworknodepolicies", policy
    )
    remaining = frozenset(vf.pci for vf in stack.fake_node.vfs if vf.pf != pf.netdev)
    try:
        stack.driver.wait_advertised(remaining)
        gone = check(
            f"deleting {policy} removes its VFs ({pf.netdev}) from the ResourceSlice",
            True,
            f"{len(remaining)} VF(s) left",
        )
    except WaitTimeout as exc:
        return check(
            f"deleting {policy} removes its VFs ({pf.netdev}) from the ResourceSlice", False, exc.message
        ), Check(
            "a new claim for the withdrawn VFs fails visibly", FAIL, "not tried: the VFs are still advertised"
        )
    return gone, probe_withdrawn_claim(stack, pf.netdev)


def probe_withdrawn_claim(stack: Stack, pf_name: str) -> Check:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": PROBE_POD, "namespace": WORKLOAD_NS},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "vf",
                            "exactly": {
                                "deviceClassName": "sriov-pcie-netdevice",
                                "count": 1,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": f'device.attributes["{DRIVER}"].PFName == "{pf_name}"'
                                        }
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }
    pairs = load_examples("multus-auto-gpu-nic-pairs.yaml")
    pod = copy.deepcopy(find(pairs, "Pod"))
    pod["metadata"]["name"] = PROBE_POD
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": PROBE_POD}]
    name = f"a new claim for {pf_name}'s withdrawn VFs fails visibly (the Pod stays unschedulable)"
    stack.cluster.apply([template])
    try:
        stack.cluster.create_pod(pod)

        def unschedulable() -> dict[str, Any] | None:
            live = stack.cluster.read_pod(WORKLOAD_NS, PROBE_POD) or {}
            cond = next(
                (
                    c
                    for c in (live.get("status") or {}).get("conditions") or []
                    if c["type"] == "PodScheduled"
                ),
                None,
            )
            return (
                cond
                if cond and cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
                else None
            )

        try:
            cond = wait_for(
                unschedulable, READY_TIMEOUT, what=f"Pod {PROBE_POD} Unschedulable", interval=0.25
            )
        except WaitTimeout as exc:
            return check(name, False, exc.message)
        live = stack.cluster.read_pod(WORKLOAD_NS, PROBE_POD) or {}
        phase = (live.get("status") or {}).get("phase")
        return check(
            name, phase == "Pending" and not live["spec"].get("nodeName"), str(cond.get("message", ""))[:200]
        )
    finally:
        stop_pod(stack, pod)
        stack.cluster.delete([template])
