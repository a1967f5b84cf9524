"""The orphan scan reads the checkpoint only after the listing started: prepare records a binding
before it creates the shadow, so a binding prepared while a scan runs is never an orphan."""

from __future__ import annotations

from sriov_dra.recovery.orphans import ORPHAN, scan
from tests.fakes.driver_env import NODE_UID, Env, vf_config
from tests.fakes.kube_api import Obj


class PrepareThenList:
    """A listing whose snapshot is taken just after one more claim was prepared."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.calls: list[str] = []

    def list_shadows(self, node_uid: str) -> list[Obj]:
        self.calls.append("list")
        pod = self.env.pod(name="late", claims=[{"name": "vfs", "resourceClaimName": "late"}])
        ref = self.env.claim("late", pod, ["0000-17-00-2"], [vf_config(netAttachDefName="rail-a")])
        assert self.env.prepare(ref).error == ""
        return self.env.shadows()


def first_claim(env: Env) -> None:
    pod = env.pod(name="first", claims=[{"name": "vfs", "resourceClaimName": "first"}])
    ref = env.claim("first", pod, ["0000-17-00-1"], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""


def test_a_reader_sees_every_binding_the_listing_holds(env: Env) -> None:
    first_claim(env)
    lister = PrepareThenList(env)

    def read():
        lister.calls.append("checkpoint")
        return env.checkpoint.snapshot_all()

    reports = scan(lister, read, NODE_UID)
    assert lister.calls == ["list", "checkpoint"]
    assert [r.status for r in reports] == ["Ready", "Ready"]


def test_records_read_before_the_listing_make_a_fresh_binding_look_orphaned(env: Env) -> None:
    """Why the reader form exists: the same race with records read up front."""
    first_claim(env)
    records = env.checkpoint.snapshot_all()
    reports = scan(PrepareThenList(env), records, NODE_UID)
    assert sorted(r.status for r in reports) == [ORPHAN, "Ready"]
