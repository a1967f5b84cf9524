"""The extended-resource DeviceClass compatibility path (spec 12.2.4): one class per resourceName,
only ours ever changed or deleted, never blocking a policy's own mapping."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from sriov_operator.core.deviceclasses import add_device_classes, body, selector
from sriov_operator.core.plan import Plan, Snapshot, build_plan, condition_of
from sriov_operator.reasons import DRA_CONFIGURATION_SYNC_FAILED
from tests.unit.sriov_operator.core.test_plan import CONFIG, Resolver, policy, rail, snap

GEN = "sriovnetwork.openshift.io/generated-by"
NAME_LABEL = "sriovnetwork.openshift.io/resource-name"


def classes(s: Snapshot) -> Plan:
    plan = build_plan(s, Resolver())
    before = len(plan.writes)
    add_device_classes(plan, s)
    plan.writes = plan.writes[before:]
    return plan


def with_classes(s: Snapshot, existing: dict[str, Any]) -> Snapshot:
    return dataclasses.replace(s, device_classes=existing)


def test_one_class_per_resource_name_with_its_extended_resource_and_a_guarded_selector() -> None:
    legacy = policy("legacy", ["ens2f0"], resourceName="legacy_vfs")
    plan = classes(snap([rail("a", "ens1f0", "rail-a-net"), rail("b", "ens2f0", "rail-b-net"), legacy]))
    assert [(w.verb, w.kind, w.name) for w in plan.writes] == [
        ("create", "DeviceClass", "legacy-vfs"),
        ("create", "DeviceClass", "sriov-vfs"),
    ]
    created = {w.name: w for w in plan.writes}
    sriov = created["sriov-vfs"]
    assert sriov.body is not None
    assert sriov.body["spec"]["extendedResourceName"] == "openshift.io/sriov_vfs"
    assert sriov.body["metadata"]["labels"] == {GEN: "sriov-network-operator", NAME_LABEL: "sriov_vfs"}
    expression = sriov.body["spec"]["selectors"][0]["cel"]["expression"]
    assert expression == selector("openshift.io/sriov_vfs")
    # a device without the attribute is not selected rather than a CEL error for the whole claim
    assert '"k8s.cni.cncf.io" in device.attributes' in expression
    assert 'device.driver == "sriovnetwork.k8snetworkplumbingwg.io"' in expression
    # the dra policies of that resourceName depend on it; a legacy-only class on nobody
    assert sriov.policies == frozenset({"uid-a", "uid-b"})
    assert created["legacy-vfs"].policies == frozenset()


def test_an_applied_class_writes_nothing_and_a_changed_one_is_updated_in_place() -> None:
    s = snap([rail("a", "ens1f0", "rail-a-net")])
    want = body("sriov-vfs", "sriov_vfs", "openshift.io/sriov_vfs")
    stored = copy.deepcopy(want)
    stored["metadata"].update(uid="dc-1", resourceVersion="7")
    assert classes(with_classes(s, {"sriov-vfs": stored})).writes == []
    stale = copy.deepcopy(stored)
    stale["spec"]["extendedResourceName"] = "example.com/old"
    (write,) = classes(with_classes(s, {"sriov-vfs": stale})).writes
    assert (write.verb, write.name) == ("update", "sriov-vfs")
    assert write.body is not None and write.body["metadata"]["resourceVersion"] == "7"
    assert write.body["spec"] == want["spec"]


def test_a_failed_class_write_withholds_ready_from_its_dra_policies() -> None:
    s = snap([rail("a", "ens1f0", "rail-a-net")])
    plan = build_plan(s, Resolver())
    add_device_classes(plan, s)
    failed = {w: "HTTP 500" for w in plan.writes if w.kind == "DeviceClass"}
    assert condition_of(plan, "uid-a", failed)[:2] == ("False", DRA_CONFIGURATION_SYNC_FAILED)


def test_a_foreign_class_colliding_names_and_no_prefix_are_left_out_with_a_warning() -> None:
    foreign = {"metadata": {"name": "sriov-vfs", "uid": "f"}, "spec": {}}
    plan = classes(with_classes(snap([rail("a", "ens1f0", "rail-a-net")]), {"sriov-vfs": foreign}))
    assert plan.writes == []
    assert any("DeviceClass sriov-vfs exists and is not generated" in w for w in plan.warnings)
    # a foreign class never blocks the policy's own mapping
    assert condition_of(plan, "uid-a", {})[0] == "True"
    clash = classes(
        snap([rail("a", "ens1f0", "rail-a-net"), policy("b", ["ens2f0"], resourceName="SRIOV_VFS")])
    )
    assert [w for w in clash.writes if w.verb == "create"] == []
    assert any("SRIOV_VFS, sriov_vfs all map to DeviceClass sriov-vfs" in w for w in clash.warnings)
    bare = classes(dataclasses.replace(snap([rail("a", "ens1f0", "rail-a-net")]), prefix=""))
    assert bare.writes == [] and any("--resource-prefix" in w for w in bare.warnings)


def test_obsolete_classes_of_ours_go_and_others_stay_also_with_the_provider_off() -> None:
    ours = body("old-vfs", "old_vfs", "openshift.io/old_vfs")
    ours["metadata"]["uid"] = "o"
    other_generated = {"metadata": {"name": "x", "uid": "x", "labels": {GEN: "sriov-network-operator"}}}
    admin = {"metadata": {"name": "admin", "uid": "a"}}
    existing = {"old-vfs": ours, "x": other_generated, "admin": admin}
    default = policy("default")  # the bootstrap policy gets no class
    plan = classes(with_classes(snap([default]), existing))
    assert [(w.verb, w.name, w.uid) for w in plan.writes] == [("delete", "old-vfs", "o")]
    off = {**CONFIG, "spec": {"featureGates": {"dynamicResourceAllocation": False}}}
    plan = classes(with_classes(snap([rail("a", "ens1f0", "rail-a-net")], config=off), existing))
    assert [(w.verb, w.name) for w in plan.writes] == [("delete", "old-vfs")]
