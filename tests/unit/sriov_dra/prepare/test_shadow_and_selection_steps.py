"""The building blocks on their own: checkpoint phase mutation, shadow ensure and finalizer
removal, consumer claim resolution and selection withdrawal. Record decoding and the strict shadow
check are pure: tests/unit/sriov_dra/core/test_bindingrecord.py and test_shadowspec.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_contract.keys import PROTECTION_FINALIZER
from sriov_dra.apierrors import ApiError
from sriov_dra.core.bindingrecord import (
    DELETING,
    RELEASE_COMPLETE,
    BindingRecord,
    record_of,
)
from sriov_dra.core.claimrecord import CheckpointError
from sriov_dra.core.shadowspec import ShadowError, shadow_object
from sriov_dra.prepare.consumer import ConsumerError, pod_claim_names
from sriov_dra.prepare.podnetworks import withdraw_claim_selections
from sriov_dra.prepare.shadows import ensure_shadow, finalize_released_shadow
from sriov_dra.state.checkpoint import PreparedClaims
from tests.fakes.driver_env import NS, Env, vf_config
from tests.fakes.kube_api import Fault, Obj
from tests.support.checkpoint import managed_binding, prepared_claim

OTHER_UID = "7b1f0e4e-1111-4222-8333-944455556666"


class FlakyStorage:
    def __init__(self) -> None:
        self.data: bytes | None = None
        self.fail = False
        self.writes = 0

    def read(self) -> bytes | None:
        return self.data

    def write(self, data: bytes) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")
        self.writes += 1
        self.data = data


@pytest.fixture
def prepared(tmp_path: Path) -> tuple[Env, BindingRecord]:
    env = Env(tmp_path)
    env.source_nad()
    _pod, ref = env.pod_with_claim(["0000-17-00-1"], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    claim = prepared_claim(env.checkpoint, ref.uid)
    return env, record_of(claim, claim.devices[0])


def test_phase_mutation_never_downgrades_writes_only_on_change_and_rolls_back(prepared) -> None:
    env, record = prepared
    storage = FlakyStorage()
    store = PreparedClaims(storage)
    store.add_claim(prepared_claim(env.checkpoint, record.identity.claim_uid))
    uid = record.identity.claim_uid
    storage.fail = True
    with pytest.raises(CheckpointError):
        store.set_managed_phase(uid, DELETING)
    assert managed_binding(store, uid)["phase"] == "Ready"
    storage.fail = False
    assert store.set_managed_phase(uid, RELEASE_COMPLETE)
    writes = storage.writes
    assert not store.set_managed_phase(uid, DELETING, keep=frozenset({RELEASE_COMPLETE}))
    assert storage.writes == writes
    assert managed_binding(store, uid)["phase"] == RELEASE_COMPLETE
    with pytest.raises(CheckpointError) as err:
        store.set_managed_phase("nope", DELETING)
    assert err.value.reason == "ClaimNotPrepared"


def _no_forget(record: BindingRecord) -> BindingRecord:
    raise AssertionError(f"{record.shadow_name} was not recorded as vanished")


def test_ensure_shadow_restores_protection_and_refuses_a_deleting_shadow(prepared) -> None:
    env, record = prepared
    key = ("nads", NS, record.shadow_name)
    env.api.objects[key]["metadata"]["finalizers"] = ["example.com/other"]
    assert ensure_shadow(env.api, record, _no_forget) == record.shadow_uid
    assert env.api.objects[key]["metadata"]["finalizers"] == ["example.com/other", PROTECTION_FINALIZER]
    env.api.objects[key]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    with pytest.raises(ShadowError) as err:
        ensure_shadow(env.api, record, _no_forget)
    assert err.value.reason == "ShadowDeletionPending"


def test_ensure_shadow_passes_access_errors_through_and_never_adopts_a_stranger(prepared) -> None:
    env, record = prepared
    fresh = record.with_shadow_uid("")
    del env.api.objects[("nads", NS, record.shadow_name)]
    env.api.fail("create", "nads", Fault(403))
    with pytest.raises(ApiError) as err:
        ensure_shadow(env.api, fresh, _no_forget)
    assert err.value.reason == "AccessDenied"
    stranger = shadow_object(record)
    stranger["metadata"]["labels"] = {}
    env.api.put("nads", stranger)
    with pytest.raises(ShadowError):
        ensure_shadow(env.api, fresh, _no_forget)
    assert env.api.stored("nads", NS, record.shadow_name)["metadata"]["labels"] == {}


def test_finalizer_removal_is_bounded_and_refuses_a_replaced_object(prepared) -> None:
    env, record = prepared
    sleeps: list[float] = []
    env.api.fail("patch", "nads", Fault(422, times=10))
    with pytest.raises(ShadowError) as err:
        finalize_released_shadow(env.api, record, record.shadow_uid, attempts=4, sleep=sleeps.append)
    assert err.value.reason == "FinalizerRemovalRetriesExhausted"
    # one attempt requested the deletion first (never finalize an object not being deleted)
    assert sleeps == [0.1, 0.2, 0.4]
    assert env.api.stored("nads", NS, record.shadow_name)["metadata"]["deletionTimestamp"]
    env.api.faults.clear()
    with pytest.raises(ShadowError) as err:
        finalize_released_shadow(env.api, record, OTHER_UID, sleep=sleeps.append)
    assert "replaced" in err.value.message
    finalize_released_shadow(env.api, record, record.shadow_uid, sleep=sleeps.append)
    assert env.api.get("nads", NS, record.shadow_name) is None
    finalize_released_shadow(env.api, record, record.shadow_uid, sleep=sleeps.append)  # NotFound completes it


def test_withdraw_leaves_a_replaced_pod_alone(prepared) -> None:
    env, record = prepared
    before = env.api.stored("pods", NS, record.pod_name)
    withdraw_claim_selections(env.api, NS, record.pod_name, OTHER_UID, record.identity.claim_uid)
    assert env.api.get("pods", NS, record.pod_name) == before
    withdraw_claim_selections(env.api, NS, "gone", record.identity.pod_uid, record.identity.claim_uid)


def test_pod_claim_names_follow_resourceclaim_name_semantics() -> None:
    pod: Obj = {
        "metadata": {"name": "p"},
        "spec": {
            "resourceClaims": [
                {"name": "direct", "resourceClaimName": "c1"},
                {"name": "tmpl", "resourceClaimTemplateName": "t"},
                {"name": "absent", "resourceClaimTemplateName": "t"},
            ]
        },
        "status": {
            "resourceClaimStatuses": [{"name": "tmpl", "resourceClaimName": "p-tmpl-x"}, {"name": "absent"}]
        },
    }
    assert pod_claim_names(pod) == [("direct", "c1", False), ("tmpl", "p-tmpl-x", True)]
    pod["status"]["resourceClaimStatuses"] = []
    with pytest.raises(ConsumerError) as err:
        pod_claim_names(pod)
    assert err.value.reason == "PodClaimStatusMissing"
    pod["spec"]["resourceClaims"] = [{"name": "neither"}]
    with pytest.raises(ConsumerError) as err:
        pod_claim_names(pod)
    assert err.value.reason == "InvalidPodClaim"
