"""What blocks removing the driver (sriov_dra.core.uninstall), on objects a real prepare made."""

from __future__ import annotations

import copy

from sriov_contract.keys import MANAGED_BY_LABEL, PROTECTION_FINALIZER
from sriov_dra.core.uninstall import (
    CHECKPOINT,
    CLAIM,
    FINALIZER,
    SHADOW,
    Blocker,
    checkpoint_blockers,
    claim_blockers,
    nad_blockers,
    summary,
)
from tests.fakes.driver_env import NS, Env, vf_config

VF1 = "0000-17-00-1"


def test_a_prepared_managed_claim_blocks_by_its_shadow_claim_and_checkpoint_record(env: Env) -> None:
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    claim = env.api.stored("claims", NS, ref.name)
    name = shadow["metadata"]["name"]
    assert nad_blockers([shadow]) == [
        Blocker(SHADOW, NS, name, shadow["metadata"]["uid"], f"managed shadow with {PROTECTION_FINALIZER}")
    ]
    assert claim_blockers([claim]) == [
        Blocker(
            CLAIM,
            NS,
            ref.name,
            claim["metadata"]["uid"],
            "1 device(s) of sriovnetwork.k8snetworkplumbingwg.io allocated, reserved for 1 consumer(s)",
        )
    ]
    (record,) = env.checkpoint.snapshot_all()
    assert checkpoint_blockers([record]) == [
        Blocker(CHECKPOINT, NS, ref.name, ref.uid, f"prepared for Pod {record.pod_uid} on this node")
    ]
    found = nad_blockers([shadow]) + claim_blockers([claim]) + checkpoint_blockers([record])
    assert summary(found) == "1 shadow(s), 1 claim(s), 1 checkpoint(s)"
    assert found[0].to_json() == {
        "kind": SHADOW,
        "namespace": NS,
        "name": name,
        "uid": shadow["metadata"]["uid"],
        "why": f"managed shadow with {PROTECTION_FINALIZER}",
    }


def nad(labels: dict[str, str] | None = None, finalizers: list[str] | None = None, deleting: bool = False):
    meta: dict[str, object] = {"namespace": "ns", "name": "n", "uid": "u"}
    if labels is not None:
        meta["labels"] = labels
    if finalizers is not None:
        meta["finalizers"] = finalizers
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_a_finalizer_counts_without_the_labels_and_foreign_objects_never_do() -> None:
    managed = {MANAGED_BY_LABEL: "sriov-dra-driver"}
    assert (
        nad_blockers(
            [
                nad(),
                nad({"app": "x"}, ["example.com/keep"]),
                nad({MANAGED_BY_LABEL: "someone-else"}),
                {"kind": "NetworkAttachmentDefinition"},
            ]
        )
        == []
    )
    (relabelled,) = nad_blockers([nad({"app": "gitops"}, [PROTECTION_FINALIZER], deleting=True)])
    assert (relabelled.kind, relabelled.why) == (
        FINALIZER,
        f"carries {PROTECTION_FINALIZER} (deleting: waits for the driver's release)",
    )
    (released,) = nad_blockers([nad(managed)])
    assert (released.kind, released.why) == (SHADOW, "managed shadow")
    assert summary([relabelled, released]) == "1 shadow(s), 1 finalizer(s)"


def test_only_claims_allocated_our_devices_block(env: Env) -> None:
    _pod, ref = env.pod_with_claim([VF1])
    claim = env.api.stored("claims", NS, ref.name)
    other = copy.deepcopy(claim)
    for result in other["status"]["allocation"]["devices"]["results"]:
        result["driver"] = "gpu.example.com"
    pending = {"metadata": {"namespace": NS, "name": "pending"}, "status": {}}
    assert claim_blockers([other, pending, {"metadata": {}}]) == []
    assert [b.name for b in claim_blockers([claim, other])] == [ref.name]
    assert summary([]) == ""
