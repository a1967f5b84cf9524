"""A repair pass with one listing of the node's shadows: a converged shadow costs no read of its
own, and every other one takes the live read-and-repair path exactly as without a listing."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from sriov_contract.keys import PROTECTION_FINALIZER
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.passdrift import PassListing
from sriov_dra.core.shadowmatch import index_shadows
from sriov_dra.kubeletplugin.api import ClaimRef
from sriov_dra.recovery import listing
from sriov_dra.recovery.repair import RepairWorker
from tests.fakes.driver_env import NODE_UID, NS, Env, vf_config
from tests.fakes.kube_api import Fault, Obj

VFS = ["0000-17-00-1", "0000-17-00-2"]


def prepared(env: Env) -> tuple[ClaimRef, str, list[Obj]]:
    _pod, ref = env.pod_with_claim(VFS, [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    shadows = sorted(env.shadows(), key=lambda o: o["metadata"]["name"])
    assert len(shadows) == len(VFS)
    env.api.reads.clear()
    env.api.writes.clear()
    return ref, ref.uid, shadows


def listing_worker(env: Env) -> RepairWorker:
    return RepairWorker(env.repair, env.checkpoint.snapshot_all, listing=env.lister.list_for_pass)


def shadow_gets(env: Env) -> list[str]:
    return [name for verb, kind, name in env.api.reads if (verb, kind) == ("get", "nads")]


def lists(env: Env) -> int:
    return sum(1 for verb, kind, _n in env.api.reads if (verb, kind) == ("list", "nads"))


def test_converged_shadows_cost_one_list_and_no_shadow_read(env: Env) -> None:
    _pod, uid, _shadows = prepared(env)
    assert listing_worker(env).run_once() == {uid: ""}
    assert (lists(env), shadow_gets(env), env.api.writes) == (1, [], [])


def test_a_healthy_pass_copies_the_checkpoint_once(env: Env, monkeypatch) -> None:
    """The listing's expectations and each claim's unlocked checks read the pass's one snapshot
    (at 1000 claims x 8 VFs each extra copy was about 70 ms of a 2 s pass)."""
    _pod, uid, _shadows = prepared(env)
    copies: list[str] = []

    def counted(name: str) -> Callable[..., Any]:
        real = getattr(env.checkpoint, name)

        def copy(*args: Any) -> Any:
            copies.append(name)
            return real(*args)

        return copy

    for name in ("snapshot_all", "snapshot_claim"):
        monkeypatch.setattr(env.checkpoint, name, counted(name))
    assert listing_worker(env).run_once() == {uid: ""}
    assert copies == ["snapshot_all"]


def test_without_a_listing_every_shadow_is_read(env: Env) -> None:
    _pod, uid, shadows = prepared(env)
    assert RepairWorker(env.repair, env.checkpoint.snapshot_all).run_once() == {uid: ""}
    assert lists(env) == 0
    assert sorted(shadow_gets(env)) == [s["metadata"]["name"] for s in shadows]


def test_no_records_no_listing(env: Env) -> None:
    assert listing_worker(env).run_once() == {}
    assert env.api.reads == []


def test_shadow_deleted_behind_the_drivers_back_is_recreated(env: Env) -> None:
    _ref, uid, shadows = prepared(env)
    gone = shadows[0]["metadata"]["name"]
    del env.api.objects[("nads", NS, gone)]
    assert listing_worker(env).run_once() == {uid: ""}
    assert shadow_gets(env) == [gone]  # only the one absent from the listing is read live
    recreated = env.api.stored("nads", NS, gone)
    assert recreated["metadata"]["uid"] != shadows[0]["metadata"]["uid"]
    assert recreated["spec"] == shadows[0]["spec"]
    assert recreated["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    assert recreated["metadata"]["uid"] in {b["shadowUID"] for b in _bindings(env, uid)}
    assert env.phases(uid) == ["Ready", "Ready"]


def test_missing_finalizer_is_restored(env: Env) -> None:
    _pod, uid, shadows = prepared(env)
    key = ("nads", NS, shadows[1]["metadata"]["name"])
    env.api.objects[key]["metadata"]["finalizers"] = ["example.com/keep"]
    assert listing_worker(env).run_once() == {uid: ""}
    assert shadow_gets(env) == [key[2]]
    assert env.api.objects[key]["metadata"]["finalizers"] == ["example.com/keep", PROTECTION_FINALIZER]


@pytest.mark.parametrize(
    "edit",
    [
        lambda o: o["spec"].update(config='{"cniVersion":"1.0.0","type":"sriov","vlan":7}'),
        lambda o: o["metadata"]["labels"].update({"sriovnetwork.k8snetworkplumbingwg.io/pod-uid": "x"}),
        lambda o: o["metadata"]["annotations"].update({"sriovnetwork.k8snetworkplumbingwg.io/binding": "{}"}),
    ],
    ids=["config", "label", "binding"],
)
def test_an_edited_shadow_gets_the_drivers_bytes_back(env: Env, edit: Callable[[Obj], None], caplog) -> None:
    """Issue 31: the driver owns the recorded shadow's bytes; repair puts them back, never adopts the edit."""
    _pod, uid, shadows = prepared(env)
    shadows = copy.deepcopy(shadows)
    key = ("nads", NS, shadows[0]["metadata"]["name"])
    edit(env.api.objects[key])
    assert listing_worker(env).run_once() == {uid: ""}
    assert shadow_gets(env) == [key[2]] and env.api.writes == [("patch", "nads", key[2])]
    restored = env.api.objects[key]
    assert restored["metadata"]["uid"] == shadows[0]["metadata"]["uid"]
    assert (restored["spec"], restored["metadata"]["labels"], restored["metadata"]["annotations"]) == (
        shadows[0]["spec"],
        shadows[0]["metadata"]["labels"],
        shadows[0]["metadata"]["annotations"],
    )
    assert "ShadowRestored" in caplog.text
    env.api.writes.clear()
    assert listing_worker(env).run_once() == {uid: ""} and env.api.writes == []


def test_deleting_shadow_takes_the_strict_path(env: Env) -> None:
    _pod, uid, shadows = prepared(env)
    shadow = shadows[0]["metadata"]
    env.api.delete_nad(NS, shadow["name"], shadow["uid"])
    env.api.writes.clear()
    assert listing_worker(env).run_once() == {uid: "ShadowDeletionPending"}
    assert shadow_gets(env) == [shadow["name"]] and env.api.writes == []


def test_listing_failure_falls_back_to_reading_each_shadow(env: Env) -> None:
    _pod, uid, shadows = prepared(env)
    del env.api.objects[("nads", NS, shadows[0]["metadata"]["name"])]
    env.api.fail("list", "nads", Fault(500))
    assert listing_worker(env).run_once() == {uid: ""}
    assert sorted(shadow_gets(env)) == [s["metadata"]["name"] for s in shadows]
    assert len(env.shadows()) == len(VFS)


def test_a_stale_listing_is_corrected_by_the_next_pass(env: Env) -> None:
    """A shadow deleted after the listing was taken is trusted for that pass only."""
    _pod, uid, shadows = prepared(env)
    taken = index_shadows(env.api.list_shadows(NODE_UID))
    gone = shadows[0]["metadata"]["name"]
    del env.api.objects[("nads", NS, gone)]
    snapshots = [PassListing(shadows=taken)]

    def listing(records: Sequence[ClaimRecord]) -> PassListing:
        return snapshots.pop() if snapshots else env.lister.list_for_pass(records)

    worker = RepairWorker(env.repair, env.checkpoint.snapshot_all, listing=listing)
    assert worker.run_once() == {uid: ""}
    assert len(env.shadows()) == 1
    assert worker.run_once() == {uid: ""}
    assert env.api.stored("nads", NS, gone)["metadata"]["finalizers"] == [PROTECTION_FINALIZER]


def test_kubelet_prepare_reads_live_even_after_a_listing_pass(env: Env) -> None:
    ref, uid, shadows = prepared(env)
    assert listing_worker(env).run_once() == {uid: ""}
    env.api.reads.clear()
    assert env.prepare(ref).error == ""
    assert lists(env) == 0
    assert sorted(shadow_gets(env)) == [s["metadata"]["name"] for s in shadows]


def _bindings(env: Env, claim_uid: str) -> list[dict[str, str]]:
    record = env.checkpoint.snapshot_claim(claim_uid)
    assert record is not None
    return [dict(d.managed_binding or {}) for d in record.devices]


def test_a_healthy_claim_costs_only_the_passs_listings(env: Env) -> None:
    _pod, uid, _shadows = prepared(env)
    assert listing_worker(env).run_once() == {uid: ""}
    assert sorted(env.api.reads) == [("list", "claims", "*"), ("list", "nads", "*"), ("list", "pods", "*")]
    assert env.api.writes == []


def test_a_pod_missing_its_selections_takes_the_live_path_alone(env: Env) -> None:
    _ref, uid, _shadows = prepared(env)
    other_pod = env.pod("other", claims=[{"name": "vfs", "resourceClaimName": "d"}])
    other = env.claim("d", other_pod, ["0000-17-00-3"], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(other).error == ""
    untouched = env.api.stored("pods", NS, "other")
    del env.api.objects[("pods", NS, "pod")]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
    env.api.reads.clear()
    env.api.writes.clear()
    assert listing_worker(env).run_once() == {uid: "", other.uid: ""}
    # The drifted claim's live path: its Pod read by the consumer check and again before the patch.
    gets = [(kind, name) for verb, kind, name in env.api.reads if verb == "get"]
    assert gets == [("pods", "pod"), ("pods", "pod")]
    assert env.api.writes == [("patch", "pods", "pod")]
    names = json.loads(
        env.api.stored("pods", NS, "pod")["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
    )
    assert len(names) == len(VFS)
    assert env.api.stored("pods", NS, "other") == untouched


def _foreign_claim(env: Env, namespace: str) -> None:
    """Another node's claim, allocated and reserved, in a namespace none of this node's claims are in."""
    env.api.put(
        "claims",
        {
            "metadata": {
                "namespace": namespace,
                "name": "theirs",
                "uid": "f0000000-0000-4000-8000-000000000001",
            },
            "status": {
                "allocation": {"devices": {"results": [{"driver": "x", "pool": "node-9", "device": "vf-9"}]}},
                "reservedFor": [
                    {"resource": "pods", "name": "p", "uid": "f0000000-0000-4000-8000-000000000002"}
                ],
            },
        },
    )


def test_a_pass_lists_claims_and_shadows_in_its_own_claims_namespaces_only(env: Env) -> None:
    """No cluster-wide claim or shadow listing (issue 34): another node's claim elsewhere is never read."""
    _pod, uid, _shadows = prepared(env)
    _foreign_claim(env, "elsewhere")
    env.api.shadow_namespaces_listed.clear()
    listing = env.lister.list_for_pass()
    assert env.api.claim_namespaces_listed == [NS]
    assert env.api.shadow_namespaces_listed == [NS]  # not every namespace's NADs either
    assert listing.claims is not None and set(listing.claims) == {uid}
    assert listing_worker(env).run_once() == {uid: ""}


def test_a_node_without_claims_lists_no_claims(env: Env) -> None:
    _foreign_claim(env, "elsewhere")
    assert env.lister.list_for_pass([]).claims == {}
    assert env.api.claim_namespaces_listed == []


def test_a_namespace_crowded_with_other_nodes_claims_is_read_claim_by_claim(env: Env, monkeypatch) -> None:
    """One large job's namespace spread over the cluster: its listing would bring every node's
    claims on every pass, so after one listing this node reads its own claims only (issue 34)."""
    monkeypatch.setattr(listing, "CROWDED_SLACK", 2)
    _pod, uid, _shadows = prepared(env)
    for i in range(8):  # other nodes' claims in this node's namespace
        env.api.put("claims", {"metadata": {"namespace": NS, "name": f"theirs-{i}", "uid": f"f0-{i}"}})
    got: list[tuple[str, str]] = []
    reader = env.lister._claim_reader
    assert reader is not None
    real = reader.get_claim

    def get_claim(namespace: str, name: str) -> Any:
        got.append((namespace, name))
        return real(namespace, name)

    monkeypatch.setattr(reader, "get_claim", get_claim)
    worker = listing_worker(env)
    assert worker.run_once() == {uid: ""}
    assert env.lister.crowded == {NS} and got == []
    env.api.reads.clear()
    env.api.claim_namespaces_listed.clear()
    assert worker.run_once() == {uid: ""}
    assert got == [(NS, "c")] and env.api.claim_namespaces_listed == []
    assert [r for r in env.api.reads if r[1] == "claims"] == [] and env.api.writes == []


def test_a_crowded_namespaces_claim_that_is_gone_takes_the_live_path(env: Env, monkeypatch) -> None:
    monkeypatch.setattr(listing, "CROWDED_SLACK", -10)
    prepared(env)
    worker = listing_worker(env)
    worker.run_once()
    assert env.lister.crowded == {NS}
    del env.api.objects[("claims", NS, "c")]
    assert env.lister.list_for_pass().claims == {}
