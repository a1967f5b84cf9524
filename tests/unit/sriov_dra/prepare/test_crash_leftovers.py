"""What a kill inside managed prepare leaves behind, and how the restarted agent converges.

A kill is simulated by an exception no handler in the driver catches (it ends the call exactly
where it is raised, as os._exit would), followed by a fresh agent over the same files and API.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sriov_contract.keys import BINDING_ANNOTATION
from sriov_dra.state.checkpoint import PreparedClaims
from tests.fakes.driver_env import Env, vf_config

VF1 = "0000-17-00-1"


class Killed(BaseException):
    """Stands in for SIGKILL: the driver's handlers catch Exception, never this."""


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path)
    e.source_nad()
    return e


def shadow_uid(env: Env, claim_uid: str) -> str:
    record = env.checkpoint.snapshot_claim(claim_uid)
    assert record is not None
    (device,) = record.devices
    return str((device.managed_binding or {})["shadowUID"])


def test_kill_after_the_shadow_create_before_its_uid_is_persisted_adopts_that_shadow(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    real = PreparedClaims.update_managed_bindings

    def killed_on_uid(self: PreparedClaims, claim_uid: str, bindings: object) -> None:
        raise Killed

    monkeypatch.setattr(PreparedClaims, "update_managed_bindings", killed_on_uid)
    with pytest.raises(Killed):
        env.prepare(ref)
    monkeypatch.setattr(PreparedClaims, "update_managed_bindings", real)
    (created,) = env.shadows()
    env.restart()
    assert shadow_uid(env, ref.uid) == "" and env.phases(ref.uid) == ["Pending"]

    assert env.prepare(ref).error == ""
    (adopted,) = env.shadows()
    assert adopted["metadata"]["uid"] == created["metadata"]["uid"]
    binding = created["metadata"]["annotations"][BINDING_ANNOTATION]
    assert adopted["metadata"]["annotations"][BINDING_ANNOTATION] == binding  # same attachment ID
    assert adopted["spec"] == created["spec"]  # same frozen config
    assert shadow_uid(env, ref.uid) == created["metadata"]["uid"]
    assert env.phases(ref.uid) == ["Ready"]
    assert [n["name"] for n in env.networks(pod)] == [created["metadata"]["name"]]


def leftover_cdi_spec(env: Env, claim_uid: str) -> None:
    """The claim spec a kill between the CDI write and the Pending record leaves: on disk, in no
    record, never answered to kubelet."""
    env.cdi.write(claim_uid, {"cdiVersion": "0.5.0", "kind": "left/over", "devices": []})
    env.restart()
    assert env.checkpoint.snapshot_claim(claim_uid) is None


def test_kill_before_the_pending_record_then_unprepare_removes_the_leftover_cdi_spec(env: Env) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    leftover_cdi_spec(env, ref.uid)
    assert env.unprepare(ref) == ""
    assert list(env.cdi.root.iterdir()) == []
    assert env.shadows() == [] and env.networks(pod) == []


def test_kill_before_the_pending_record_then_retry_replaces_the_leftover_cdi_spec(env: Env) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    leftover_cdi_spec(env, ref.uid)
    assert env.prepare(ref).error == ""
    spec = json.loads(env.cdi.path(ref.uid).read_text())
    assert [d["name"] for d in spec["devices"]] == [f"{ref.uid}-{VF1}"]
    assert env.phases(ref.uid) == ["Ready"] and len(env.networks(pod)) == 1
    assert env.unprepare(ref) == ""
    assert list(env.cdi.root.iterdir()) == []
