"""The desired-state plan (spec 12.2.4-12.2.6): what is generated, withdrawn, kept and cleaned."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sriov_operator.core.attributes import NetworkRef
from sriov_operator.core.keys import REF_NAME_KEY, REF_NAMESPACE_KEY
from sriov_operator.core.ownership import is_ours, owner_reference
from sriov_operator.core.plan import Plan, Snapshot, Write, build_plan, condition_of
from sriov_operator.core.resolve import SourceNad
from sriov_operator.reasons import (
    CONFLICTING_DRA_MAPPING,
    DRA_CONFIGURATION_APPLIED,
    DRA_CONFIGURATION_SYNC_FAILED,
    DRA_INACTIVE,
    INVALID_DRA_ATTRIBUTE,
    SOURCE_NAD_NOT_READY,
    SRIOV_NETWORK_NOT_FOUND,
    UNSUPPORTED_MANAGED_SELECTOR,
    fail,
)
from tests.unit.sriov_operator.core.conftest import OPS

GEN = "sriovnetwork.openshift.io/generated-by"
UID_LABEL = "sriovnetwork.openshift.io/node-policy-uid"
POOL = "sriovnetwork.openshift.io/resource-pool"
NAD_NAME = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName"
NAD_NS = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace"
CONFIG = {
    "metadata": {"name": "default", "namespace": OPS, "uid": "cfg-uid"},
    "spec": {"featureGates": {"dynamicResourceAllocation": True}},
}
LABELS = {"networking.example.com/dual-rail": "true"}


def pf(name: str, pci: str, vfs: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "pciAddress": pci,
        "vendor": "15b3",
        "deviceID": "1017",
        "linkType": "ETH",
        "Vfs": [{"pciAddress": v, "vfID": i, "deviceID": "1018"} for i, v in enumerate(vfs)],
    }


STATE = {
    "status": {
        "interfaces": [
            pf("ens1f0", "0000:03:00.0", ["0000:03:00.2"]),
            pf("ens2f0", "0000:04:00.0", ["0000:04:00.2"]),
        ]
    }
}


def node(name: str = "node-a", labels: dict[str, str] | None = None, hostname: bool = True) -> dict[str, Any]:
    lab = dict(LABELS if labels is None else labels)
    if hostname:
        lab["kubernetes.io/hostname"] = name
    return {"metadata": {"name": name, "labels": lab}}


def ref(name: str) -> dict[str, Any]:
    return {REF_NAME_KEY: {"string": name}, REF_NAMESPACE_KEY: {"string": OPS}}


def policy(name: str, pf_names: list[str] | None = None, dra: Any = "none", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceName": "sriov_vfs",
        "nodeSelector": dict(LABELS),
        "priority": 99,
        "numVfs": 16,
        "nicSelector": {"vendor": "15b3", "pfNames": pf_names or ["ens1f0"]},
        "deviceType": "netdevice",
        "linkType": "eth",
        **spec,
    }
    if dra != "none":
        body["dra"] = dra
    return {"metadata": {"name": name, "namespace": OPS, "uid": f"uid-{name}", "generation": 1}, "spec": body}


def rail(name: str, pf_name: str, network: str) -> dict[str, Any]:
    return policy(name, [pf_name], {"attributes": ref(network)})


class Resolver:
    def __init__(self, broken: dict[str, str] | None = None) -> None:
        self.broken = broken or {}
        self.calls: list[NetworkRef] = []

    def __call__(self, r: NetworkRef) -> SourceNad:
        self.calls.append(r)
        if r.name in self.broken:
            raise fail(self.broken[r.name], f"SriovNetwork {r} is broken")
        return SourceNad("ai-workloads", r.name)


def snap(
    policies: list[dict[str, Any]],
    *,
    nodes: list[dict[str, Any]] | None = None,
    states: dict[str, Any] | None = None,
    attributes: dict[str, Any] | None = None,
    rps: dict[str, Any] | None = None,
    config: dict[str, Any] | None = CONFIG,
) -> Snapshot:
    return Snapshot(
        operator_namespace=OPS,
        policy_namespace=OPS,
        prefix="openshift.io",
        config=config,
        policies=policies,
        nodes=[node()] if nodes is None else nodes,
        node_states={"node-a": STATE} if states is None else states,
        attributes=attributes or {},
        resource_policies=rps or {},
    )


def applied(plan: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The objects the plan's creates/updates would leave, as the server would return them."""
    attrs: dict[str, Any] = {}
    rps: dict[str, Any] = {}
    for w in plan.writes:
        target = attrs if w.kind == "DeviceAttributes" else rps
        if w.verb == "delete":
            target.pop(w.name, None)
        else:
            target[w.name] = copy.deepcopy(dict(w.body or {}))
            target[w.name]["metadata"]["uid"] = f"obj-{w.name}"
    return attrs, rps


def conditions(plan: Plan, failed: dict[Write, str] | None = None) -> dict[str, tuple[str, str]]:
    out = {}
    for uid in plan.policies:
        status, reason, _ = condition_of(plan, uid, failed or {})
        out[uid] = (status, reason)
    return out


def test_the_spec_14_3_rails_generate_two_isolated_objects_and_one_node_config() -> None:
    plan = build_plan(
        snap([rail("rail-a-policy", "ens1f0", "rail-a-net"), rail("rail-b-policy", "ens2f0", "rail-b-net")]),
        Resolver(),
    )
    attrs, rps = applied(plan)
    a = attrs["dra-policy-uid-rail-a-policy-attrs"]
    assert a["metadata"]["labels"] == {GEN: "sriov-network-operator", UID_LABEL: "uid-rail-a-policy"}
    assert a["metadata"]["ownerReferences"] == [owner_reference(CONFIG)]
    assert a["spec"]["attributes"] == {
        "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"},
        NAD_NAME: {"string": "rail-a-net"},
        NAD_NS: {"string": "ai-workloads"},
    }
    assert attrs["dra-policy-uid-rail-b-policy-attrs"]["spec"]["attributes"][NAD_NAME] == {
        "string": "rail-b-net"
    }
    assert set(attrs) == {"dra-policy-uid-rail-a-policy-attrs", "dra-policy-uid-rail-b-policy-attrs"}
    configs = rps["node-a"]["spec"]["configs"]
    assert configs == [
        {
            "deviceAttributesSelector": {
                "matchLabels": {GEN: "sriov-network-operator", UID_LABEL: "uid-rail-a-policy"}
            },
            "resourceFilters": [{"vendors": ["15b3"], "pfNames": ["ens1f0"], "linkType": "eth"}],
        },
        {
            "deviceAttributesSelector": {
                "matchLabels": {GEN: "sriov-network-operator", UID_LABEL: "uid-rail-b-policy"}
            },
            "resourceFilters": [{"vendors": ["15b3"], "pfNames": ["ens2f0"], "linkType": "eth"}],
        },
    ]
    assert rps["node-a"]["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}
    ]
    assert rps["node-a"]["metadata"]["labels"] == {
        GEN: "sriov-network-operator",
        "sriovnetwork.openshift.io/node": "node-a",
    }
    # Publication precedes the node config that selects it.
    assert [w.kind for w in plan.writes] == ["DeviceAttributes", "DeviceAttributes", "SriovResourcePolicy"]
    assert set(conditions(plan).values()) == {("True", DRA_CONFIGURATION_APPLIED)}
    assert "configured on node(s) node-a" in condition_of(plan, "uid-rail-a-policy", {})[2]


def test_replanning_the_applied_state_writes_nothing() -> None:
    policies = [rail("a", "ens1f0", "rail-a-net"), policy("legacy", ["ens2f0"], resourceName="legacy_vfs")]
    attrs, rps = applied(build_plan(snap(policies), Resolver()))
    again = build_plan(snap(policies, attributes=attrs, rps=rps), Resolver())
    assert again.writes == []


def test_each_reference_is_resolved_once_per_pass() -> None:
    resolver = Resolver()
    build_plan(
        snap(
            [rail("a", "ens1f0", "rail-a-net")],
            nodes=[node("node-a"), node("node-b")],
            states={"node-a": STATE, "node-b": STATE},
        ),
        resolver,
    )
    assert resolver.calls == [NetworkRef(OPS, "rail-a-net")]


def test_nil_empty_and_attributes_only_blocks() -> None:
    policies = [
        policy("legacy", ["ens1f0"]),
        policy("empty", ["ens2f0"], {}),
        policy(
            "custom",
            ["ens2f0"],
            {"attributes": {"example.com/rail": {"string": "b"}}},
            nodeSelector={"other": "x"},
        ),
    ]
    attrs, rps = applied(build_plan(snap(policies), Resolver()))
    assert attrs["sriov-vfs-attrs"]["metadata"]["labels"] == {
        GEN: "sriov-network-operator",
        POOL: "sriov-vfs",
    }
    assert attrs["sriov-vfs-attrs"]["spec"]["attributes"] == {
        "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"}
    }
    assert attrs["dra-policy-uid-empty-attrs"]["spec"]["attributes"] == {
        "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"}
    }
    assert attrs["dra-policy-uid-custom-attrs"]["spec"]["attributes"]["example.com/rail"] == {"string": "b"}
    assert NAD_NAME not in attrs["dra-policy-uid-custom-attrs"]["spec"]["attributes"]
    selectors = [c["deviceAttributesSelector"] for c in rps["node-a"]["spec"]["configs"]]
    # The legacy selector is upstream's pool label; per-policy objects never carry it.
    assert selectors == [
        {"matchLabels": {GEN: "sriov-network-operator", UID_LABEL: "uid-empty"}},
        {"matchLabels": {POOL: "sriov-vfs"}},
    ]
    assert all(POOL not in a["metadata"]["labels"] for n, a in attrs.items() if n.startswith("dra-policy-"))


def test_two_rails_in_one_pool_do_not_merge_and_legacy_cleanup_keeps_them() -> None:
    policies = [
        rail("a", "ens1f0", "rail-a-net"),
        rail("b", "ens2f0", "rail-b-net"),
        policy("legacy", ["ens1f0"], nodeSelector={"x": "y"}),
    ]
    attrs, rps = applied(build_plan(snap(policies), Resolver()))
    assert {n for n in attrs} == {"dra-policy-uid-a-attrs", "dra-policy-uid-b-attrs", "sriov-vfs-attrs"}
    assert build_plan(snap(policies, attributes=attrs, rps=rps), Resolver()).writes == []


def test_an_unresolved_reference_withdraws_only_its_attributes_and_keeps_its_filter() -> None:
    policies = [rail("a", "ens1f0", "rail-a-net"), rail("b", "ens2f0", "rail-b-net")]
    attrs, rps = applied(build_plan(snap(policies), Resolver()))
    plan = build_plan(
        snap(policies, attributes=attrs, rps=rps), Resolver({"rail-b-net": SOURCE_NAD_NOT_READY})
    )
    assert [str(w) for w in plan.writes] == ["delete DeviceAttributes dra-policy-uid-b-attrs"]
    assert plan.writes[0].uid == "obj-dra-policy-uid-b-attrs" and plan.writes[0].policies == {"uid-b"}
    # The node config is unchanged: b's filter and selector stay, so its devices are blocked in
    # the driver instead of falling through to another config.
    assert "dra-policy-uid-a-attrs" in attrs
    assert conditions(plan) == {
        "uid-a": ("True", DRA_CONFIGURATION_APPLIED),
        "uid-b": ("False", SOURCE_NAD_NOT_READY),
    }


def test_an_unresolved_policy_never_publishes_and_an_invalid_block_is_unresolved() -> None:
    bad = policy("bad", ["ens2f0"], {"attributes": {"plain": {"int": 1}}}, nodeSelector={"other": "x"})
    plan = build_plan(
        snap(
            [rail("a", "ens1f0", "rail-a-net"), rail("b", "ens2f0", "gone"), bad],
            nodes=[node("node-a"), node("node-b", labels={"other": "x"})],
            states={"node-a": STATE, "node-b": STATE},
        ),
        Resolver({"gone": SRIOV_NETWORK_NOT_FOUND}),
    )
    attrs, rps = applied(plan)
    assert set(attrs) == {"dra-policy-uid-a-attrs"}

    def selected(node_name: str) -> list[str]:
        configs = rps[node_name]["spec"]["configs"]
        return [c["deviceAttributesSelector"]["matchLabels"][UID_LABEL] for c in configs]

    assert selected("node-a") == ["uid-a", "uid-b"] and selected("node-b") == ["uid-bad"]
    reasons = conditions(plan)
    assert reasons["uid-b"] == ("False", SRIOV_NETWORK_NOT_FOUND)
    assert reasons["uid-bad"] == ("False", INVALID_DRA_ATTRIBUTE)


def test_a_pool_name_taken_by_a_per_policy_object_is_not_generated_twice() -> None:
    policies = [policy("a", ["ens1f0"], {}), policy("l", ["ens2f0"], resourceName="dra-policy-uid-a")]
    plan = build_plan(snap(policies), Resolver())
    assert [w.name for w in plan.writes if w.kind == "DeviceAttributes"] == ["dra-policy-uid-a-attrs"]


def test_a_problem_is_recorded_once() -> None:
    plan = Plan(active=True)
    plan.add("u", "R", "m")
    plan.add("u", "R", "m")
    assert len(plan.problems["u"]) == 1


def test_a_failed_write_withholds_ready_and_a_failed_invalidation_too() -> None:
    plan = build_plan(snap([rail("a", "ens1f0", "rail-a-net")]), Resolver())
    create = plan.writes[0]
    status, reason, message = condition_of(plan, "uid-a", {create: "HTTP 500"})
    assert (status, reason) == ("False", DRA_CONFIGURATION_SYNC_FAILED)
    assert "create DeviceAttributes dra-policy-uid-a-attrs failed: HTTP 500; retrying" in message
    node_write = plan.writes[-1]
    assert condition_of(plan, "uid-a", {node_write: "HTTP 403"})[1] == DRA_CONFIGURATION_SYNC_FAILED
    attrs, rps = applied(plan)
    broken = build_plan(
        snap([rail("a", "ens1f0", "rail-a-net")], attributes=attrs, rps=rps),
        Resolver({"rail-a-net": SOURCE_NAD_NOT_READY}),
    )
    (invalidation,) = broken.writes
    assert condition_of(broken, "uid-a", {invalidation: "HTTP 500"})[0] == "False"
    # An unrelated failed write does not affect the policy.
    assert condition_of(plan, "uid-a", {Write("delete", "DeviceAttributes", "x"): "e"})[0] == "True"


def test_an_unowned_object_of_a_desired_name_is_never_adopted_changed_or_deleted() -> None:
    squatter: dict[str, Any] = {
        "metadata": {"name": "dra-policy-uid-a-attrs", "uid": "s"},
        "spec": {"attributes": {}},
    }
    other_owner = {
        "metadata": {
            "name": "node-a",
            "uid": "o",
            "labels": {GEN: "sriov-network-operator"},
            "ownerReferences": [{"kind": "Deployment", "name": "x", "uid": "d", "controller": True}],
        },
        "spec": {},
    }
    plan = build_plan(
        snap(
            [rail("a", "ens1f0", "rail-a-net")],
            attributes={squatter["metadata"]["name"]: squatter},
            rps={"node-a": other_owner},
        ),
        Resolver(),
    )
    assert plan.writes == []
    status, reason, message = condition_of(plan, "uid-a", {})
    assert (status, reason) == ("False", DRA_CONFIGURATION_SYNC_FAILED)
    assert (
        "DeviceAttributes sriov-network-operator/dra-policy-uid-a-attrs exists and is not generated"
        in message
    )
    assert "SriovResourcePolicy sriov-network-operator/node-a exists" in message
    # Unresolved now: the squatter still is not deleted, and the policy says why.
    plan = build_plan(
        snap([rail("a", "ens1f0", "gone")], attributes={squatter["metadata"]["name"]: squatter}),
        Resolver({"gone": SRIOV_NETWORK_NOT_FOUND}),
    )
    assert all(w.verb != "delete" for w in plan.writes)
    assert any(p.reason == DRA_CONFIGURATION_SYNC_FAILED for p in plan.problems["uid-a"])


def test_a_labelled_object_without_owner_is_adopted_and_a_stale_pool_label_is_removed() -> None:
    labelled = {
        "metadata": {
            "name": "dra-policy-uid-a-attrs",
            "uid": "l",
            "resourceVersion": "5",
            "labels": {GEN: "sriov-network-operator", POOL: "sriov-vfs", "team": "x"},
        },
        "spec": {"attributes": {}},
    }
    plan = build_plan(
        snap([rail("a", "ens1f0", "rail-a-net")], attributes={"dra-policy-uid-a-attrs": labelled}), Resolver()
    )
    update = plan.writes[0]
    assert update.verb == "update" and update.body is not None
    md = update.body["metadata"]
    assert md["resourceVersion"] == "5" and md["ownerReferences"] == [owner_reference(CONFIG)]
    assert md["labels"] == {GEN: "sriov-network-operator", UID_LABEL: "uid-a", "team": "x"}


def test_obsolete_generated_objects_go_by_name_set_and_independent_objects_stay() -> None:
    ours = {"labels": {GEN: "sriov-network-operator"}, "ownerReferences": [owner_reference(CONFIG)]}
    old_uid: dict[str, Any] = {"metadata": {"name": "dra-policy-old-attrs", "uid": "o1", **ours}, "spec": {}}
    unused_pool: dict[str, Any] = {"metadata": {"name": "gone-attrs", "uid": "o2", **ours}, "spec": {}}
    independent: dict[str, Any] = {
        "metadata": {"name": "admin-overlay", "uid": "o3", "labels": {POOL: "sriov-vfs"}},
        "spec": {},
    }
    old_node = {"metadata": {"name": "node-z", "uid": "o4", **ours}, "spec": {}}
    plan = build_plan(
        snap(
            [rail("a", "ens1f0", "rail-a-net")],
            attributes={o["metadata"]["name"]: o for o in (old_uid, unused_pool, independent)},
            rps={"node-z": old_node},
        ),
        Resolver(),
    )
    deletes = [(w.kind, w.name, w.uid) for w in plan.writes if w.verb == "delete"]
    assert deletes == [
        ("DeviceAttributes", "dra-policy-old-attrs", "o1"),
        ("DeviceAttributes", "gone-attrs", "o2"),
        ("SriovResourcePolicy", "node-z", "o4"),
    ]
    # Cleanup comes after every publication and node config.
    assert [w.verb for w in plan.writes][-3:] == ["delete"] * 3


def test_overlapping_rails_with_different_maps_withdraw_that_node_only() -> None:
    policies = [
        rail("a", "ens1f0", "rail-a-net"),
        rail("b", "ens1f0", "rail-b-net"),
        rail("c", "ens2f0", "rail-c-net"),
    ]
    plan = build_plan(
        snap(
            policies,
            nodes=[node("node-a"), node("node-b")],
            states={
                "node-a": STATE,
                "node-b": {"status": {"interfaces": [pf("ens9", "0000:09:00.0", ["0000:09:00.2"])]}},
            },
        ),
        Resolver(),
    )
    _, rps = applied(plan)
    assert rps["node-a"]["spec"]["configs"] == []  # present and empty: nothing advertised
    assert [len(c["resourceFilters"]) for c in rps["node-b"]["spec"]["configs"]] == [1, 1, 1]
    reasons = conditions(plan)
    assert reasons == {
        "uid-a": ("False", CONFLICTING_DRA_MAPPING),
        "uid-b": ("False", CONFLICTING_DRA_MAPPING),
        "uid-c": ("False", CONFLICTING_DRA_MAPPING),
    }
    message = condition_of(plan, "uid-c", {})[2]
    assert "node node-a's configs are withdrawn" in message and "policies a, b" in message
    assert "select 1 common VF(s) on node node-a" in condition_of(plan, "uid-a", {})[2]


def test_overlaps_that_are_safe_are_kept() -> None:
    same = [
        policy("a", ["ens1f0"], {"attributes": {"example.com/r": {"int": 1}}}),
        policy("b", ["ens1f0"], {"attributes": {"example.com/r": {"int": 1}}}),
    ]
    assert len(applied(build_plan(snap(same), Resolver()))[1]["node-a"]["spec"]["configs"]) == 2
    legacy = [policy("a", ["ens1f0"]), policy("b", ["ens1f0"], resourceName="other")]
    assert len(applied(build_plan(snap(legacy), Resolver()))[1]["node-a"]["spec"]["configs"]) == 2


def test_an_unresolved_policy_overlapping_another_withdraws_the_node() -> None:
    policies = [rail("a", "ens1f0", "rail-a-net"), rail("b", "ens1f0", "rail-a-net")]
    plan = build_plan(snap(policies), Resolver({"rail-a-net": SOURCE_NAD_NOT_READY}))
    assert applied(plan)[1]["node-a"]["spec"]["configs"] == []
    # The unresolved reason outranks the overlap it causes.
    assert conditions(plan)["uid-a"] == ("False", SOURCE_NAD_NOT_READY)
    assert any(p.reason == CONFLICTING_DRA_MAPPING for p in plan.problems["uid-a"])


def test_a_dra_policy_overlapping_a_legacy_pool_withdraws_the_node() -> None:
    plan = build_plan(snap([rail("a", "ens1f0", "rail-a-net"), policy("legacy", ["ens1f0"])]), Resolver())
    assert applied(plan)[1]["node-a"]["spec"]["configs"] == []


def test_an_untranslatable_managed_selector_withdraws_its_node_and_a_legacy_one_is_skipped() -> None:
    vfio = policy("vfio", ["ens2f0"], {}, deviceType="vfio-pci")
    plan = build_plan(snap([rail("a", "ens1f0", "rail-a-net"), vfio]), Resolver())
    assert applied(plan)[1]["node-a"]["spec"]["configs"] == []
    assert conditions(plan) == {
        "uid-a": ("False", UNSUPPORTED_MANAGED_SELECTOR),
        "uid-vfio": ("False", UNSUPPORTED_MANAGED_SELECTOR),
    }
    assert "node node-a's configs are withdrawn" in condition_of(plan, "uid-a", {})[2]
    legacy_vfio = policy("lvfio", ["ens2f0"], deviceType="vfio-pci")
    plan = build_plan(snap([rail("a", "ens1f0", "rail-a-net"), legacy_vfio]), Resolver())
    assert len(applied(plan)[1]["node-a"]["spec"]["configs"]) == 1
    assert plan.warnings and "vfio-pci" in plan.warnings[0]


def test_the_provider_switch_stages_config_and_removes_only_our_objects() -> None:
    off = {**CONFIG, "spec": {"featureGates": {"dynamicResourceAllocation": False}}}
    ours = {
        "metadata": {
            "name": "dra-policy-uid-a-attrs",
            "uid": "o",
            "labels": {GEN: "sriov-network-operator"},
            "ownerReferences": [owner_reference(CONFIG)],
        }
    }
    independent = {"metadata": {"name": "admin", "uid": "i"}}
    resolver = Resolver()
    bad = policy("bad", ["ens2f0"], {"attributes": {"plain": {"int": 1}}})
    plan = build_plan(
        snap(
            [rail("a", "ens1f0", "rail-a-net"), bad],
            attributes={"dra-policy-uid-a-attrs": ours, "admin": independent},
            rps={"node-a": {**ours, "metadata": {**ours["metadata"], "name": "node-a"}}},
            config=off,
        ),
        resolver,
    )
    assert [str(w) for w in plan.writes] == [
        "delete DeviceAttributes dra-policy-uid-a-attrs",
        "delete SriovResourcePolicy node-a",
    ]
    assert resolver.calls == []  # no source reads while the provider is off
    assert conditions(plan) == {"uid-a": ("False", DRA_INACTIVE), "uid-bad": ("False", INVALID_DRA_ATTRIBUTE)}
    assert "spec.featureGates.dynamicResourceAllocation: true" in condition_of(plan, "uid-a", {})[2]
    # No SriovOperatorConfig at all is the same as off; objects it owned are still ours to remove.
    plan = build_plan(
        snap([rail("a", "ens1f0", "rail-a-net")], attributes={"dra-policy-uid-a-attrs": ours}, config=None),
        resolver,
    )
    assert [w.verb for w in plan.writes] == ["delete"] and not plan.active


def test_the_default_policy_takes_no_part_and_refuses_a_dra_block() -> None:
    plan = build_plan(snap([policy("default", ["ens1f0"]), policy("default", ["ens2f0"], {})]), Resolver())
    assert applied(plan)[1] == {}
    (uid,) = plan.policies
    assert condition_of(plan, uid, {})[1] == INVALID_DRA_ATTRIBUTE


def test_nodes_need_a_hostname_label_a_node_state_and_a_selecting_policy() -> None:
    nodes = [node("no-host", hostname=False), node("no-state"), node("unselected", labels={}), node("node-a")]
    states = {"no-host": STATE, "unselected": STATE, "node-a": STATE}
    _, rps = applied(
        build_plan(snap([rail("a", "ens1f0", "rail-a-net")], nodes=nodes, states=states), Resolver())
    )
    assert set(rps) == {"node-a"}


def test_a_policy_selecting_no_node_is_ready_without_nodes() -> None:
    plan = build_plan(snap([policy("a", ["ens1f0"], {}, nodeSelector={"nowhere": "x"})]), Resolver())
    assert condition_of(plan, "uid-a", {})[2].endswith("no node selected yet")


def test_a_node_name_too_long_for_a_label_is_still_configured() -> None:
    long = "n" * 70
    _, rps = applied(
        build_plan(
            snap([rail("a", "ens1f0", "rail-a-net")], nodes=[node(long)], states={long: STATE}), Resolver()
        )
    )
    assert rps[long]["metadata"]["labels"] == {GEN: "sriov-network-operator"}


def test_lower_priority_numbers_come_first_then_names() -> None:
    policies = [
        policy("z", ["ens1f0"], {}, priority=10),
        policy("b", ["ens2f0"], {}),
        policy("a", ["ens2f0"], {}, priority="x"),
    ]
    _, rps = applied(build_plan(snap(policies), Resolver()))
    order = [
        c["deviceAttributesSelector"]["matchLabels"][UID_LABEL] for c in rps["node-a"]["spec"]["configs"]
    ]
    assert order == ["uid-z", "uid-a", "uid-b"]


@pytest.mark.parametrize(
    ("meta", "config", "ours"),
    [
        ({}, CONFIG, False),
        ({"labels": {GEN: "other"}}, CONFIG, False),
        ({"labels": {GEN: "sriov-network-operator"}}, CONFIG, True),
        (
            {
                "labels": {GEN: "sriov-network-operator"},
                "ownerReferences": [{**owner_reference(CONFIG), "uid": "old"}],
            },
            CONFIG,
            False,
        ),
        (
            {
                "labels": {GEN: "sriov-network-operator"},
                "ownerReferences": [{**owner_reference(CONFIG), "uid": "old"}],
            },
            None,
            True,
        ),
        (
            {
                "labels": {GEN: "sriov-network-operator"},
                "ownerReferences": [{**owner_reference(CONFIG), "name": "x"}],
            },
            CONFIG,
            False,
        ),
    ],
)
def test_ownership(meta, config, ours) -> None:
    assert is_ours({"metadata": meta}, config) is ours


def test_a_changed_spec_updates_in_place() -> None:
    policies = [rail("a", "ens1f0", "rail-a-net")]
    attrs, rps = applied(build_plan(snap(policies), Resolver()))
    policies[0]["spec"]["nicSelector"]["pfNames"] = ["ens2f0"]
    policies[0]["spec"]["dra"]["attributes"]["example.com/r"] = {"bool": False}
    plan = build_plan(snap(policies, attributes=attrs, rps=rps), Resolver())
    assert [str(w) for w in plan.writes] == [
        "update DeviceAttributes dra-policy-uid-a-attrs",
        "update SriovResourcePolicy node-a",
    ]
