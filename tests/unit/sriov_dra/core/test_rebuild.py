"""Records rebuilt from this node's shadows and claims after a damaged checkpoint: exactly what the
first prepare recorded, back in Pending for repair to finish, or named as not rebuilt."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from sriov_contract.keys import BINDING_ANNOTATION, NODE_UID_LABEL, REGISTRY_ANNOTATION
from sriov_dra.core.bindingrecord import PENDING
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.hostdevice import prepared_device
from sriov_dra.core.rebuild import Rebuild, rebuild
from sriov_dra.core.vfconfig import VfConfig
from tests.fakes.driver_env import NODE, NODE_UID, Env, vf_config

VF1, VF2, VF3 = "0000-17-00-1", "0000-17-00-2", "0000-17-00-3"
OTHER_UID = "99999999-1111-4222-8333-944455556666"


def prepared(env: Env) -> tuple[str, str]:
    """Claim a (two VFs) of pod-a and claim b (one VF) of pod-b, both Ready."""
    uids = []
    for name, devices in (("a", [VF1, VF2]), ("b", [VF3])):
        pod = env.pod(name=f"pod-{name}", claims=[{"name": "vfs", "resourceClaimName": name}])
        ref = env.claim(name, pod, devices, [vf_config(netAttachDefName="rail-a")])
        assert env.prepare(ref).error == ""
        uids.append(ref.uid)
    return uids[0], uids[1]


def run(env: Env, known: dict[str, ClaimRecord], shadows: list[Any] | None = None) -> Rebuild:
    return rebuild(
        env.shadows() if shadows is None else shadows,
        known,
        {c["metadata"]["uid"]: c for (kind, _n, _m), c in env.api.objects.items() if kind == "claims"},
        {p["metadata"]["uid"]: p for (kind, _n, _m), p in env.api.objects.items() if kind == "pods"},
        node_name=NODE,
        node_uid=NODE_UID,
        pci_of={name: vf.pci_address for name, vf in env.inventory.items()},
    )


def as_pending(record: ClaimRecord) -> ClaimRecord:
    """What the first prepare recorded, back before the shadow was observed."""
    devices = tuple(
        replace(d, managed_binding={**dict(d.managed_binding or {}), "phase": PENDING, "shadowUID": ""})
        for d in record.devices
    )
    return replace(record, devices=devices)


def claim_obj(env: Env, uid: str) -> dict[str, Any]:
    (obj,) = [
        c for (k, _n, _m), c in env.api.objects.items() if k == "claims" and c["metadata"]["uid"] == uid
    ]
    return obj


def shadows_of(env: Env, claim_uid: str) -> list[dict[str, Any]]:
    return [
        s
        for s in env.shadows()
        if json.loads(s["metadata"]["annotations"][BINDING_ANNOTATION])["claimUID"] == claim_uid
    ]


def test_every_lost_claim_is_rebuilt_exactly_as_first_recorded(env: Env) -> None:
    a, b = prepared(env)
    original = {r.claim_uid: r for r in env.checkpoint.snapshot_all()}
    got = run(env, {})
    assert got.not_rebuilt == ()
    assert {r.claim_uid: r for r in got.records} == {uid: as_pending(r) for uid, r in original.items()}
    # a generation that still holds claim a: only b is rebuilt
    assert [r.claim_uid for r in run(env, {a: original[a]}).records] == [b]


def test_a_missing_pod_only_costs_the_selection_order(env: Env) -> None:
    a, _b = prepared(env)
    for key in [k for k in env.api.objects if k[0] == "pods"]:
        del env.api.objects[key]
    (record,) = [r for r in run(env, {}).records if r.claim_uid == a]
    assert [(d.managed_binding or {})["planIndex"] for d in record.devices] == [0, 0]


def test_a_pod_with_an_unreadable_registry_is_like_a_missing_one(env: Env) -> None:
    a, _b = prepared(env)
    for (kind, _n, _m), pod in env.api.objects.items():
        if kind == "pods":
            pod["metadata"]["annotations"][REGISTRY_ANNOTATION] = "{"
    (record,) = [r for r in run(env, {}).records if r.claim_uid == a]
    assert [(d.managed_binding or {})["planIndex"] for d in record.devices] == [0, 0]


def test_foreign_and_accounted_shadows_are_left_alone(env: Env) -> None:
    prepared(env)
    shadows = env.shadows()
    relabelled = [
        {**s, "metadata": {**s["metadata"], "labels": {NODE_UID_LABEL: OTHER_UID}}} for s in shadows
    ]
    assert run(env, {}, relabelled) == Rebuild((), ())
    assert run(env, {r.claim_uid: r for r in env.checkpoint.snapshot_all()}) == Rebuild((), ())


def test_a_binding_naming_another_node_is_not_ours(env: Env) -> None:
    prepared(env)
    shadows = env.shadows()
    for s in shadows:
        binding = json.loads(s["metadata"]["annotations"][BINDING_ANNOTATION])
        s["metadata"]["annotations"][BINDING_ANNOTATION] = json.dumps({**binding, "nodeUID": OTHER_UID})
    assert run(env, {}, shadows) == Rebuild((), ())


def test_what_cannot_be_rebuilt_exactly_is_named(env: Env) -> None:
    a, b = prepared(env)
    original = {r.claim_uid: r for r in env.checkpoint.snapshot_all()}
    shadows = env.shadows()
    unreadable = {
        **shadows[0],
        "metadata": {**shadows[0]["metadata"], "annotations": {BINDING_ANNOTATION: "{"}},
    }
    got = run(env, {a: replace(original[a], devices=())}, [unreadable, *shadows[1:]])
    whys = sorted(n.why.split(":")[0] for n in got.not_rebuilt)
    assert "unreadable binding" in whys and "its claim is recorded without this binding" in whys
    assert [r.claim_uid for r in got.records] == [b]


def test_a_malformed_record_accounts_for_nothing(env: Env) -> None:
    a, b = prepared(env)
    original = {r.claim_uid: r for r in env.checkpoint.snapshot_all()}
    broken = replace(
        original[a], devices=tuple(replace(d, managed_binding=None) for d in original[a].devices)
    )
    got = run(env, {a: broken})
    assert [r.claim_uid for r in got.records] == [b]
    assert {n.why for n in got.not_rebuilt} == {"its claim is recorded without this binding"}


def refused(env: Env, claim_uid: str) -> set[str]:
    got = run(env, {})
    assert claim_uid not in {r.claim_uid for r in got.records}
    return {n.why for n in got.not_rebuilt}


def test_a_deleted_claim_is_not_rebuilt(env: Env) -> None:
    a, _b = prepared(env)
    obj = claim_obj(env, a)
    del env.api.objects[("claims", obj["metadata"]["namespace"], obj["metadata"]["name"])]
    assert refused(env, a) == {f"its ResourceClaim {a} is gone"}


def test_a_claim_reserved_for_another_pod_is_not_rebuilt(env: Env) -> None:
    a, _b = prepared(env)
    claim_obj(env, a)["status"]["reservedFor"][0]["uid"] = OTHER_UID
    assert len(refused(env, a)) == 1


def test_a_claim_device_without_a_shadow_is_not_rebuilt(env: Env) -> None:
    a, _b = prepared(env)
    claim = claim_obj(env, a)
    results = claim["status"]["allocation"]["devices"]["results"]
    results.append({**results[0], "device": "0000-17-00-0"})  # a device no shadow stands for
    assert refused(env, a) == {f"the claim's device {NODE}/0000-17-00-0 has no shadow of this node"}


def test_a_claim_that_binds_a_driver_is_not_rebuilt(env: Env) -> None:
    a, _b = prepared(env)
    claim_obj(env, a)["status"]["allocation"]["devices"]["config"].append(vf_config(driver="iavf"))
    assert refused(env, a) == {"its VfConfig binds driver iavf; the driver bound before is unknown"}


def test_a_shadow_that_does_not_match_exactly_is_not_rebuilt(env: Env) -> None:
    a, _b = prepared(env)
    for s in shadows_of(env, a):
        s["spec"]["config"] = '{"type":"sriov"}'
    (why,) = refused(env, a)
    assert "is not the shadow of attachment" in why


def test_a_shadow_the_allocation_no_longer_holds_is_not_rebuilt(env: Env) -> None:
    a, _b = prepared(env)
    results = claim_obj(env, a)["status"]["allocation"]["devices"]["results"]
    del results[1]
    assert refused(env, a) == {"the claim's allocation no longer holds this shadow's device"}


def test_vfio_and_vhost_devices_name_their_device_nodes() -> None:
    device = prepared_device(
        claim_uid="c1",
        pod_uid="p1",
        request="vf/sub",
        pool=NODE,
        name="0000-17-00-1",
        pci_address="0000:17:00.1",
        config=VfConfig(driver="vfio-pci", add_vhost_mount=True),
        original_driver="iavf",
        binding=None,
        iommu_group="42",
    )
    assert device.request_names == ("vf",)
    assert device.device_nodes == ("/dev/vfio/42", "/dev/vfio/vfio", "/dev/vhost-net", "/dev/net/tun")
    assert device.env["SRIOVNETWORK_0000_17_00_1_VFIO_DEVICE"] == "/dev/vfio/42"
    assert device.config == {"driver": "vfio-pci", "addVhostMount": True}
