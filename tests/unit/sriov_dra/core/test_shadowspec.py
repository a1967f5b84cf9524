"""The shadow NAD's pure half: the object the driver creates, the strict check of a live one
against its record, and the patches that drop or restore only our finalizer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from sriov_contract.binding import parse_binding
from sriov_contract.errors import ContractError
from sriov_contract.keys import BINDING_ANNOTATION, PROTECTION_FINALIZER, shadow_labels
from sriov_dra.core.shadowspec import (
    ShadowError,
    check_shadow,
    drop_protection_patch,
    finalizers_of,
    is_deleting,
    restore_owned_patch,
    restore_protection_patch,
    shadow_object,
    uid_of,
)
from tests.unit.sriov_dra.core.test_bindingrecord import (
    CLAIM_UID,
    CONFIG,
    DEVICE,
    NODE_UID,
    OTHER_UID,
    POD_UID,
    RECORD,
    SHADOW_UID,
)

Edit = Callable[[dict[str, Any]], object]


def written() -> dict[str, Any]:
    """The shadow as the API server holds it after the driver's Create."""
    obj = shadow_object(RECORD)
    obj["metadata"].update(uid=SHADOW_UID, resourceVersion="12")
    return obj


def _annotate(text: str) -> Edit:
    return lambda o: o["metadata"]["annotations"].update({BINDING_ANNOTATION: text})


def _contract_message(text: str) -> str:
    with pytest.raises(ContractError) as err:
        parse_binding(text).verify_identity(RECORD.identity)
    return err.value.message


_STRANGER = replace(RECORD, identity=RECORD.identity._replace(pod_uid=OTHER_UID)).binding().to_json()
_OTHER_INTERFACE = replace(RECORD, interface="dra1").binding().to_json()


def test_the_created_shadow_is_protected_and_attributed_from_the_first_instant() -> None:
    assert shadow_object(RECORD) == {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": RECORD.shadow_name,
            "namespace": "ns",
            "labels": shadow_labels(POD_UID, CLAIM_UID, NODE_UID),
            "annotations": {BINDING_ANNOTATION: RECORD.binding().to_json()},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "pod",
                    "uid": POD_UID,
                    "blockOwnerDeletion": False,
                }
            ],
            "finalizers": [PROTECTION_FINALIZER],
        },
        "spec": {"config": CONFIG},
    }


@pytest.mark.parametrize("releasing", [False, True])
def test_the_written_shadow_passes_the_strict_check(releasing: bool) -> None:
    obj = written()
    check_shadow(obj, RECORD, releasing=releasing)
    # a record whose shadow UID is not known yet accepts the object by its content alone
    obj["metadata"]["uid"] = OTHER_UID
    check_shadow(obj, RECORD.with_shadow_uid(""), releasing=releasing)


def _set(**fields: object) -> Edit:
    return lambda o: o["metadata"].update(fields)


_ELSEWHERE = "it has another namespace or name"
_LABELS = "its managed labels differ"
_CONFIG = "its spec.config differs from the frozen configuration"

REFUSALS: dict[str, tuple[Edit, str]] = {
    "no metadata": (lambda o: o.pop("metadata"), _ELSEWHERE),
    "namespace": (_set(namespace="elsewhere"), _ELSEWHERE),
    "name": (_set(name="dra-sriov-other"), _ELSEWHERE),
    "uid": (_set(uid=OTHER_UID), f"its UID {OTHER_UID} is not the recorded {SHADOW_UID}"),
    "labels": (_set(labels={}), _LABELS),
    "no labels": (lambda o: o["metadata"].pop("labels"), _LABELS),
    "no annotation": (_set(annotations={}), f"it has no {BINDING_ANNOTATION} annotation"),
    "annotation empty": (_annotate("{}"), _contract_message("{}")),
    "another binding": (_annotate(_STRANGER), _contract_message(_STRANGER)),
    "another interface": (
        _annotate(_OTHER_INTERFACE),
        "its binding annotation records another source, PCI address or interface",
    ),
    "config": (lambda o: o["spec"].update(config="{}"), _CONFIG),
    "no spec": (lambda o: o.pop("spec"), _CONFIG),
    "another owner": (
        lambda o: o["metadata"]["ownerReferences"][0].update(uid=OTHER_UID),
        "it is owned by another Pod",
    ),
}


def _assert_refused(obj: dict[str, Any], releasing: bool, why: str) -> None:
    with pytest.raises(ShadowError) as err:
        check_shadow(obj, RECORD, releasing=releasing)
    assert err.value.reason == "ShadowConflict"
    assert err.value.message.startswith(
        f"NetworkAttachmentDefinition ns/{RECORD.shadow_name} is not the shadow of attachment "
        f"{RECORD.attachment_id} (claim {CLAIM_UID}, device {DEVICE}): {why}. The driver does not modify it;"
    )
    assert err.value.details == {"name": RECORD.shadow_name, "namespace": "ns"}


@pytest.mark.parametrize("releasing", [False, True])
@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_anything_but_the_exact_shadow_is_refused(refusal: str, releasing: bool) -> None:
    edit, why = REFUSALS[refusal]
    obj = written()
    edit(obj)
    _assert_refused(obj, releasing, why)


def test_only_a_release_tolerates_a_missing_owner_reference() -> None:
    obj = written()
    obj["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "uid": OTHER_UID}]
    _assert_refused(obj, False, f"it has no ownerReference to Pod {POD_UID}")
    check_shadow(obj, RECORD, releasing=True)


def test_an_already_parsed_binding_and_expectation_are_used_as_given() -> None:
    obj = written()
    check_shadow(obj, RECORD, releasing=False, binding=RECORD.binding(), expected=RECORD.binding())
    other = parse_binding(_OTHER_INTERFACE)
    with pytest.raises(ShadowError) as err:
        check_shadow(obj, RECORD, releasing=False, binding=other)
    assert "its binding annotation records another source" in err.value.message
    with pytest.raises(ShadowError) as err:
        check_shadow(obj, RECORD, releasing=False, expected=other)
    assert "its binding annotation records another source" in err.value.message


def test_metadata_readers_tolerate_missing_or_malformed_metadata() -> None:
    assert (uid_of(written()), is_deleting(written()), finalizers_of(written())) == (
        SHADOW_UID,
        False,
        [PROTECTION_FINALIZER],
    )
    deleting = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": None}}
    assert (uid_of(deleting), is_deleting(deleting), finalizers_of(deleting)) == ("", True, [])
    for junk in ({}, {"metadata": "junk"}):
        assert (uid_of(junk), is_deleting(junk), finalizers_of(junk)) == ("", False, [])


def test_dropping_protection_keeps_other_finalizers_of_exactly_this_version() -> None:
    obj = written()
    obj["metadata"]["finalizers"] = ["example.com/a", PROTECTION_FINALIZER, "example.com/b"]
    assert drop_protection_patch(obj) == [
        {"op": "test", "path": "/metadata/uid", "value": SHADOW_UID},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "12"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/a", "example.com/b"]},
    ]


def test_restoring_protection_appends_our_finalizer_to_exactly_this_version() -> None:
    obj = written()
    obj["metadata"]["finalizers"] = ["example.com/a"]
    assert restore_protection_patch(obj) == [
        {"op": "test", "path": "/metadata/uid", "value": SHADOW_UID},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "12"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/a", PROTECTION_FINALIZER]},
    ]


RESTORABLE: dict[str, Edit] = {
    "config": lambda o: o["spec"].update(config='{"type":"sriov","deviceID":"0000:17:00.7"}'),
    "no spec": lambda o: o.pop("spec"),
    "label": lambda o: o["metadata"]["labels"].update({"sriovnetwork.k8snetworkplumbingwg.io/pod-uid": "x"}),
    "no labels": lambda o: o["metadata"].pop("labels"),
    "binding": _annotate("{}"),
    "no annotations": lambda o: o["metadata"].pop("annotations"),
}


@pytest.mark.parametrize("edit", sorted(RESTORABLE))
def test_the_recorded_shadow_gets_the_frozen_bytes_back_and_keeps_what_others_added(edit: str) -> None:
    obj = written()
    obj["metadata"].setdefault("labels", {})["team"] = "a"
    RESTORABLE[edit](obj)
    ops = restore_owned_patch(obj, RECORD)
    assert ops is not None
    assert ops[:2] == [
        {"op": "test", "path": "/metadata/uid", "value": SHADOW_UID},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "12"},
    ]
    values = {op["path"]: op["value"] for op in ops[2:]}
    assert values["/spec"]["config"] == CONFIG
    assert values["/metadata/annotations"][BINDING_ANNOTATION] == RECORD.binding().to_json()
    expected = shadow_labels(POD_UID, CLAIM_UID, NODE_UID)
    assert values["/metadata/labels"] == {**({} if edit == "no labels" else {"team": "a"}), **expected}


def test_an_intact_or_unrecorded_shadow_gets_no_restore() -> None:
    obj = written()
    assert restore_owned_patch(obj, RECORD) is None
    obj["spec"]["config"] = "{}"
    # only the recorded UID proves the driver made the object: anything else is never rewritten
    assert restore_owned_patch(obj, RECORD.with_shadow_uid("")) is None
    obj["metadata"]["uid"] = OTHER_UID
    assert restore_owned_patch(obj, RECORD) is None
