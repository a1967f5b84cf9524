"""A repair pass's listings against the checkpoint: healthy only when every fact the live path checks
reads back as recorded; every difference, and every missing listing, names the live path."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from sriov_contract.keys import REGISTRY_ANNOTATION
from sriov_dra.core.bindingrecord import PENDING
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.passdrift import HEALTHY, PassListing, by_uid, drift, own_bindings, ready_bindings
from sriov_dra.core.selection import merge_managed_selections
from sriov_dra.core.shadowmatch import index_shadows
from sriov_dra.model import DRIVER_NAME
from tests.fakes.kube_api import apply_patch
from tests.unit.sriov_dra.core.test_bindingrecord import (
    CLAIM_UID,
    NODE_UID,
    OTHER_UID,
    POD_UID,
    RECORD,
    checkpointed,
)
from tests.unit.sriov_dra.core.test_shadowspec import written

NODE = "node-a"
Obj = dict[str, Any]


def _record(**binding: Any) -> ClaimRecord:
    record, _device = checkpointed({**RECORD.to_json(), **binding})
    return record


RECORDED = _record()


def _pod() -> Obj:
    pod: Obj = {
        "metadata": {"namespace": "ns", "name": "pod", "uid": POD_UID, "resourceVersion": "3"},
        "spec": {"nodeName": NODE},
    }
    ops = merge_managed_selections(pod, [RECORD.managed_selection()])
    assert ops is not None
    return apply_patch(pod, ops)


def _claim() -> Obj:
    results = [{"driver": DRIVER_NAME, "pool": NODE, "device": RECORD.identity.device}]
    results.append({"driver": "gpu.example.com", "pool": NODE, "device": "gpu-0"})
    return {
        "metadata": {"namespace": "ns", "name": RECORDED.name, "uid": CLAIM_UID},
        "status": {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": "pod", "uid": POD_UID}],
        },
    }


def _listing() -> PassListing:
    return PassListing(
        shadows=index_shadows([written()]),
        pods=by_uid([_pod()]),
        claims=by_uid([_claim()]),
        node_uid=NODE_UID,
        ready=ready_bindings([RECORDED]),
    )


def _drift(listing: PassListing, record: ClaimRecord = RECORDED) -> str:
    """`record` as the checkpoint holds it now, against a pass that began with RECORDED."""
    return drift(record, listing, node_uid=NODE_UID)


def _edit(kind: str, change: Callable[[Obj], object]) -> PassListing:
    listing = _listing()
    objs = {"pod": listing.pods, "claim": listing.claims}[kind]
    assert objs is not None
    (obj,) = objs.values()
    edited = copy.deepcopy(dict(obj))
    change(edited)
    if kind == "pod":
        return replace(listing, pods=by_uid([edited]))
    return replace(listing, claims=by_uid([edited]))


def test_a_claim_listed_exactly_as_recorded_is_healthy() -> None:
    assert _drift(_listing()) == HEALTHY


def test_the_pods_other_ready_claims_must_be_selected_too() -> None:
    identity = RECORD.identity._replace(claim_uid=OTHER_UID, device="0000-17-00-2")
    other = replace(RECORD, identity=identity, interface="dra1", plan_index=1)
    listing = replace(_listing(), ready={POD_UID: [RECORD, other]})
    assert _drift(listing) == "the Pod's selections are incomplete"


def test_ready_bindings_keep_only_all_ready_readable_records_in_plan_order() -> None:
    late = _record(planIndex=5)
    early = replace(RECORD, plan_index=1)
    first, _ = checkpointed({**early.to_json()})
    pending = _record(phase=PENDING)
    corrupt = _record(configSHA256="0" * 64)
    got = ready_bindings([late, first, pending, corrupt])
    assert [b.plan_index for b in got[POD_UID]] == [1, 5]


@pytest.mark.parametrize(
    ("listing", "why"),
    [
        (PassListing(shadows={}), "this pass has no complete listing"),
        (replace(_listing(), claims=None), "this pass has no complete listing"),
        (replace(_listing(), pods=None), "this pass has no complete listing"),
        (replace(_listing(), shadows=None), "this pass has no complete listing"),
        (replace(_listing(), ready=None), "this pass has no complete listing"),
        (replace(_listing(), ready={}), "its record is unreadable, or newer than this pass"),
        (replace(_listing(), node_uid="other"), "the Node reads as UID other"),
        (replace(_listing(), claims={}), "the claim is not listed"),
        (replace(_listing(), pods={}), "its Pod is not listed on this node"),
        (replace(_listing(), shadows={}), f"shadow ns/{RECORD.shadow_name} differs"),
        (_edit("claim", lambda c: c["status"].update(reservedFor=[])), "the claim's reservation changed"),
        (
            _edit("claim", lambda c: c["status"]["reservedFor"][0].update(uid="other")),
            "the claim's reservation changed",
        ),
        (
            _edit("claim", lambda c: c["status"]["reservedFor"][0].update(apiGroup="apps")),
            "the claim's reservation changed",
        ),
        (
            _edit("claim", lambda c: c["status"]["reservedFor"].append(dict(c["status"]["reservedFor"][0]))),
            "the claim's reservation changed",
        ),
        (_edit("claim", lambda c: c.pop("status")), "the claim's reservation changed"),
        (
            _edit("claim", lambda c: c["status"]["allocation"]["devices"]["results"][0].update(device="x")),
            "the claim's allocation changed",
        ),
        (_edit("claim", lambda c: c["status"].pop("allocation")), "the claim's allocation changed"),
        (
            _edit("pod", lambda p: p["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z")),
            "its Pod is terminating",
        ),
        (_edit("pod", lambda p: p["metadata"].pop("annotations")), "the Pod's selections are incomplete"),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_every_difference_takes_the_live_path(listing: PassListing, why: str) -> None:
    assert _drift(listing) == why


def test_a_pod_listed_as_metadata_only_is_healthy() -> None:
    """The listing selected it by spec.nodeName on the API server: its spec is not needed."""
    pod = _pod()
    metadata_only = {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": pod["metadata"],
    }
    assert _drift(replace(_listing(), pods=by_uid([metadata_only]))) == HEALTHY


def test_a_pod_registry_claiming_the_entry_otherwise_is_a_conflict_for_the_live_path() -> None:
    def moved(pod: Obj) -> None:
        annotations = pod["metadata"]["annotations"]
        annotations[REGISTRY_ANNOTATION] = annotations[REGISTRY_ANNOTATION].replace('"dra0"', '"dra9"')

    why = _drift(_edit("pod", moved))
    assert why.startswith("the Pod's selections conflict: ")


def test_records_not_all_ready_always_take_the_live_path() -> None:
    assert _drift(_listing(), _record(phase=PENDING)) == "bindings are Pending"
    mixed, _ = checkpointed(RECORD.to_json(), replace(checkpointed(None)[1], device="0000-17-00-2"))
    assert _drift(_listing(), mixed) == "bindings are /Ready"
    assert _drift(_listing(), _record(phase="Deleting")) == "bindings are Deleting"


def test_an_unreadable_record_takes_the_live_path_which_reports_it() -> None:
    corrupt = _record(configSHA256="0" * 64)
    listing = replace(_listing(), ready=ready_bindings([corrupt]))
    assert _drift(listing, corrupt) == "its record is unreadable, or newer than this pass"


def test_own_bindings_are_the_records_among_its_pods() -> None:
    other = replace(RECORD, identity=RECORD.identity._replace(claim_uid=OTHER_UID))
    assert own_bindings(replace(_listing(), ready={POD_UID: [other, RECORD]}), RECORDED) == [RECORD]
    assert own_bindings(PassListing(shadows={}), RECORDED) == []


def test_by_uid_keys_objects_by_their_uid() -> None:
    assert by_uid([{"metadata": {"uid": "u"}}, {}]) == {"u": {"metadata": {"uid": "u"}}, "": {}}
