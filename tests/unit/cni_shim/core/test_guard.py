"""The managed-shadow guard through the real ADD path: every check rejects before any delegate runs."""

from __future__ import annotations

import copy
import json

import pytest

from cni_shim.errors import CniError
from sriov_contract import keys
from testbed.managed_shadows import POD_UID, managed_shadow, registry_annotation, rendered_sriov_config

NS = "ns1"


def _setup(shim, *, registry=True, selection_extra=None, mutate=None, second=None):
    shadow = managed_shadow(namespace=NS, pod_name="pod1")
    if mutate is not None:
        mutate(shadow)
    selections = [dict(shadow["selection"], **(selection_extra or {}))]
    if second is not None:
        selections.append(second)
    annotations = {keys.NETWORKS_ANNOTATION: json.dumps(selections)}
    if registry:
        annotations[keys.REGISTRY_ANNOTATION] = registry_annotation(POD_UID, [shadow["entry"]])
    shim.kube.add_pod(NS, "pod1", POD_UID, annotations)
    shim.kube.nads[(NS, shadow["name"])] = shadow["nad"]
    return shadow


def _run(shim):
    return shim.run(
        "ADD", shim.conf(), args=f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}"
    )


def test_valid_shadow_runs_sriov_with_its_frozen_bytes_and_no_claim_reads(shim):
    shadow = _setup(shim)
    out = _run(shim)
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [("ptp", "ADD", "eth0"), ("sriov", "ADD", "dra0")]
    assert shim.executor.calls[1].stdin["deviceID"] == "0000:03:00.1"
    assert {kind for kind, _, _ in shim.kube.reads} == {"pod", "nad"}
    assert ("nad", NS, shadow["name"]) in shim.kube.reads
    assert shim.plan_doc()["delegates"][1]["managed"] is True


def _meta(key, value):
    def mutate(shadow):
        shadow["nad"]["metadata"][key] = value

    return mutate


def _binding(**changes):
    def mutate(shadow):
        ann = shadow["nad"]["metadata"]["annotations"]
        doc = json.loads(ann[keys.BINDING_ANNOTATION])
        doc.update(changes)
        ann[keys.BINDING_ANNOTATION] = json.dumps(doc)

    return mutate


def _config(text):
    def mutate(shadow):
        shadow["nad"]["spec"]["config"] = text

    return mutate


def _annotation(key, value):
    def mutate(shadow):
        shadow["nad"]["metadata"]["annotations"][key] = value

    return mutate


OTHER_UID = "99999999-2222-3333-4444-555555555555"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (_binding(version=2), "ManagedShadowBindingInvalid"),
        (_binding(podUID=OTHER_UID), "ManagedShadowPodMismatch"),
        (_binding(nodeName="node-b"), "ManagedShadowNodeMismatch"),
        (_meta("ownerReferences", []), "ManagedShadowOwnerMismatch"),
        (
            _meta("ownerReferences", [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": OTHER_UID}]),
            "ManagedShadowOwnerMismatch",
        ),
        (_meta("finalizers", []), "ManagedShadowUnprotected"),
        (_meta("deletionTimestamp", "2026-01-01T00:00:00Z"), "ManagedShadowTerminating"),
        (_annotation(keys.RESOURCE_NAME_ANNOTATION, ""), "ManagedShadowHasResourceName"),
        (_config(rendered_sriov_config("0000:03:00.1") + " "), "ManagedShadowConfigHashMismatch"),
        (
            _config(json.dumps({"cniVersion": "1.0.0", "name": "x", "type": "macvlan"})),
            "ManagedShadowConfigNotStaticSriov",
        ),
        (_config(rendered_sriov_config("0000:03:00.1", pciBusID="0000:03:00.2")), "ManagedShadowPciMismatch"),
        (_config(rendered_sriov_config("0000:03:00.2")), "ManagedShadowPciMismatch"),
    ],
)
def test_each_failed_check_is_named_and_nothing_runs(shim, mutate, reason):
    _setup(shim, mutate=mutate)
    out = _run(shim)
    assert out.status == 1
    assert out.json["details"] == reason, out.json
    assert shim.executor.calls == []
    assert shim.plan_doc() is None


def test_shadow_outside_the_pod_namespace_is_refused(shim):
    shadow = managed_shadow(namespace="other", pod_name="pod1")
    shim.kube.add_pod(NS, "pod1", POD_UID, {keys.NETWORKS_ANNOTATION: json.dumps([shadow["selection"]])})
    shim.kube.nads[("other", shadow["name"])] = shadow["nad"]
    out = _run(shim)
    assert out.json["details"] == "ManagedShadowNamespaceMismatch"


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"deviceID": "0000:03:00.2"}, "ManagedShadowSelectionOverride"),
        ({"interface": "dra7"}, "ManagedShadowSelectionOverride"),
        ({"mac": "02:00:00:00:00:09"}, "ManagedShadowSelectionOverride"),
        ({"cni-args": {"a": 1}}, "ManagedShadowSelectionOverride"),
    ],
)
def test_selection_overrides_are_refused(shim, extra, reason):
    _setup(shim, selection_extra=extra, registry=False)
    out = _run(shim)
    assert out.json["details"] == reason, out.json
    assert shim.executor.calls == []


def test_registry_must_list_each_managed_selection_exactly_once(shim):
    shadow = managed_shadow(namespace=NS, pod_name="pod1")
    _setup(shim, second=shadow["selection"])
    out = _run(shim)
    assert out.json["details"] == "ManagedShadowSelectionCount"
    assert shim.executor.calls == []


def test_duplicate_managed_selection_without_registry_is_refused(shim):
    shadow = managed_shadow(namespace=NS, pod_name="pod1")
    second = dict(shadow["selection"], interface="dra1")
    _setup(shim, registry=False, second=second)
    out = _run(shim)
    # the second selection asks for another interface than the binding records
    assert out.json["details"] == "ManagedShadowSelectionOverride"


def test_registry_uid_and_hash_must_match(shim):
    shadow = _setup(shim)
    entry = copy.deepcopy(shadow["entry"])
    entry["uid"] = OTHER_UID
    shim.kube.pods[(NS, "pod1")]["metadata"]["annotations"][keys.REGISTRY_ANNOTATION] = registry_annotation(
        POD_UID, [entry]
    )
    out = _run(shim)
    assert out.json["details"] == "ManagedShadowRegistryMismatch"


def test_registry_for_another_pod_is_refused(shim):
    _setup(shim)
    shim.kube.pods[(NS, "pod1")]["metadata"]["annotations"][keys.REGISTRY_ANNOTATION] = registry_annotation(
        OTHER_UID, []
    )
    out = _run(shim)
    assert out.json["details"] == "ManagedShadowRegistryPodMismatch"


def test_del_of_a_managed_attachment_works_while_the_shadow_is_terminating_or_gone(shim):
    shadow = _setup(shim)
    assert _run(shim).status == 0
    shim.kube.nads[(NS, shadow["name"])]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    shim.executor.calls.clear()
    out = shim.run("DEL", shim.conf(), args=f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}")
    assert out.status == 0
    # the IPAM DEL of its own after the sriov DEL: sriov-cni frees nothing without its cache
    assert shim.executor.commands() == [
        ("sriov", "DEL", "dra0"),
        ("static", "DEL", "dra0"),
        ("ptp", "DEL", "eth0"),
    ]


def test_del_of_a_managed_attachment_releases_its_address_once_more_after_the_delegate(shim):
    """sriov-cni frees the address only through its own cache, which a node that lost power
    between its IPAM ADD and that cache never wrote: the shim's IPAM DEL after it, with the
    stdin and environment the delegate got, frees it either way. An ordinary delegate gets none."""
    cluster_ipam = {"type": "host-local", "subnet": "10.9.0.0/24"}
    _setup(shim)
    conf = shim.conf(
        delegates=[{"cniVersion": "1.0.0", "name": "cluster", "type": "ptp", "ipam": cluster_ipam}]
    )
    args = f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}"
    assert shim.run("ADD", conf, args=args).status == 0
    shim.executor.calls.clear()
    assert shim.run("DEL", conf, args=args).status == 0
    assert shim.executor.commands() == [
        ("sriov", "DEL", "dra0"),
        ("static", "DEL", "dra0"),
        ("ptp", "DEL", "eth0"),
    ]
    sriov, static, _ = shim.executor.calls
    assert static.stdin == sriov.stdin and static.env == sriov.env


def test_a_failed_address_release_fails_the_del_as_the_delegates_own_would(shim):
    _setup(shim)
    assert _run(shim).status == 0
    shim.executor.failures[("static", "DEL")] = CniError("DelegateFailed", "pool locked", 11)
    out = shim.run("DEL", shim.conf(), args=f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}")
    assert out.status != 0
    assert "pool locked" in out.json["msg"]


def test_ordinary_nads_are_untouched_by_the_guard(shim):
    shim.kube.add_pod(
        NS,
        "pod1",
        POD_UID,
        {keys.NETWORKS_ANNOTATION: "plain", keys.REGISTRY_ANNOTATION: registry_annotation(POD_UID, [])},
    )
    shim.kube.add_nad(
        NS,
        "plain",
        {"cniVersion": "1.0.0", "type": "macvlan"},
        annotations={keys.RESOURCE_NAME_ANNOTATION: "x"},
    )
    out = _run(shim)
    assert out.status == 0, out.stdout
    assert shim.executor.calls[1].stdin["name"] == "plain"  # name filled from metadata.name
