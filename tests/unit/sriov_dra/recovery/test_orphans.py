"""The orphan scan and orphan finalization over the in-memory API (spec 8.5, 18.3)."""

from __future__ import annotations

import pytest

from sriov_contract.keys import NODE_UID_LABEL, PROTECTION_FINALIZER
from sriov_dra.cli.preflight import DRIVER_RIGHTS
from sriov_dra.recovery.orphans import ORPHAN, OrphanError, correlate, finalize_orphan, scan
from tests.fakes.driver_env import NODE_UID, NS, Env, vf_config
from tests.fakes.kube_api import Obj
from tests.support.deploy import DRIVER_NEEDS

VF1, VF2 = "0000-17-00-1", "0000-17-00-2"
OTHER_NODE = "99999999-1111-4222-8333-944455556666"


class Lister:
    def __init__(self, env: Env) -> None:
        self.env = env

    def list_shadows(self, node_uid: str) -> list[Obj]:
        return [s for s in self.env.shadows() if s["metadata"]["labels"].get(NODE_UID_LABEL) == node_uid]


def two_bindings(env: Env):
    refs = []
    for i, vf in enumerate((VF1, VF2)):
        pod = env.pod(name=f"pod{i}", claims=[{"name": "vfs", "resourceClaimName": f"c{i}"}])
        refs.append(env.claim(f"c{i}", pod, [vf], [vf_config(netAttachDefName="rail-a")]))
    r1, r2 = refs
    assert env.prepare(r1).error == "" and env.prepare(r2).error == ""
    return r1, r2


def test_shadows_without_checkpoint_are_orphans_and_other_nodes_are_ignored(env: Env) -> None:
    r1, r2 = two_bindings(env)
    shadows = env.shadows()
    foreign = {**shadows[0], "metadata": {**shadows[0]["metadata"], "labels": {NODE_UID_LABEL: OTHER_NODE}}}
    # the checkpoint lost claim 2 (say, a wiped node): its shadow is an orphan, claim 1's is Ready
    records = [r for r in env.checkpoint.snapshot_all() if r.claim_uid == r1.uid]
    reports = correlate([*shadows, foreign], records, NODE_UID)
    assert sorted((r.claim_uid, r.status) for r in reports) == sorted([(r1.uid, "Ready"), (r2.uid, ORPHAN)])
    assert all(r.protected and not r.deleting for r in reports)


def test_altered_shadow_is_a_conflict_not_a_match(env: Env) -> None:
    two_bindings(env)
    shadows = env.shadows()
    shadows[0]["spec"]["config"] = '{"type":"sriov"}'
    reports = correlate(shadows, env.checkpoint.snapshot_all(), NODE_UID)
    assert sorted(r.status for r in reports) == ["Conflict", "Ready"]


def test_finalize_needs_an_exact_orphan_id_and_keeps_foreign_finalizers(env: Env) -> None:
    r1, r2 = two_bindings(env)
    lister = Lister(env)
    records = [r for r in env.checkpoint.snapshot_all() if r.claim_uid == r1.uid]
    (orphan,) = [r for r in scan(lister, records, NODE_UID) if r.orphan]
    (active,) = [r for r in scan(lister, records, NODE_UID) if not r.orphan]
    key = ("nads", NS, orphan.name)
    env.api.objects[key]["metadata"]["finalizers"] = [PROTECTION_FINALIZER, "example.com/keep"]
    with pytest.raises(OrphanError) as err:
        finalize_orphan(lister, env.api, records, NODE_UID, active.attachment_id)
    assert err.value.reason == "NotAnOrphan"
    with pytest.raises(OrphanError):
        finalize_orphan(lister, env.api, records, NODE_UID, orphan.attachment_id[:40])
    env.api.writes.clear()
    done = finalize_orphan(lister, env.api, records, NODE_UID, orphan.attachment_id)
    assert done.claim_uid == r2.uid
    obj = env.api.objects[key]
    assert obj["metadata"]["finalizers"] == ["example.com/keep"] and obj["metadata"]["deletionTimestamp"]
    assert [(v, k) for v, k, _ in env.api.writes] == [("delete", "nads"), ("patch", "nads")]
    # the active binding's shadow was never touched
    assert env.api.objects[("nads", NS, active.name)]["metadata"]["finalizers"] == [PROTECTION_FINALIZER]


def test_preflight_checks_exactly_the_rights_the_manifest_must_grant() -> None:
    asked = {(r.verb, r.group, r.resource, r.subresource, r.namespace) for r in DRIVER_RIGHTS}
    needed = {(p.verb, p.group, p.resource, p.subresource, p.namespace) for p in DRIVER_NEEDS}
    assert asked == needed
