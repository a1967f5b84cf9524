"""The repair listing's convergence decision: yes only for the exact shadow the driver wrote, and
never for anything the strict shadow check (or ensure's deletion/finalizer checks) would act on."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_contract.errors import ContractError, ReasonedError
from sriov_contract.keys import BINDING_ANNOTATION, PROTECTION_FINALIZER
from sriov_dra.core.bindingrecord import BindingRecord
from sriov_dra.core.shadowmatch import converged, index_shadows, listed_shadow
from sriov_dra.core.shadowspec import check_shadow, finalizers_of, is_deleting
from tests.unit.sriov_dra.core.test_bindingrecord import CONFIG, OTHER_UID, POD_UID, RECORD, SHADOW_UID
from tests.unit.sriov_dra.core.test_shadowspec import written


def lookup(obj: dict[str, Any], record: BindingRecord = RECORD) -> bool:
    return converged(index_shadows([obj]).get((record.pod_namespace, record.shadow_name)), record)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = obj["metadata"]
    return meta


def _reencode(obj: dict[str, Any]) -> None:
    doc = json.loads(_meta(obj)["annotations"][BINDING_ANNOTATION])
    _meta(obj)["annotations"][BINDING_ANNOTATION] = json.dumps(dict(reversed(doc.items())))


MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "other uid": lambda o: _meta(o).update(uid=OTHER_UID),
    "no uid": lambda o: _meta(o).pop("uid"),
    "deleting": lambda o: _meta(o).update(deletionTimestamp="2026-01-01T00:00:00Z"),
    "no finalizer": lambda o: _meta(o).update(finalizers=["example.com/keep"]),
    "no finalizers": lambda o: _meta(o).pop("finalizers"),
    "no owner": lambda o: _meta(o).update(ownerReferences=[]),
    "other owner": lambda o: _meta(o)["ownerReferences"][0].update(uid=OTHER_UID),
    "second owner": lambda o: _meta(o)["ownerReferences"].append(
        {"kind": "Pod", "uid": OTHER_UID, "name": "x", "apiVersion": "v1"}
    ),
    "label edited": lambda o: _meta(o)["labels"].update({k: "x" for k in list(_meta(o)["labels"])[:1]}),
    "labels gone": lambda o: _meta(o).pop("labels"),
    "annotation gone": lambda o: _meta(o)["annotations"].pop(BINDING_ANNOTATION),
    "annotation re-encoded": _reencode,
    "annotation edited": lambda o: _meta(o)["annotations"].update(
        {BINDING_ANNOTATION: _meta(o)["annotations"][BINDING_ANNOTATION].replace("dra0", "dra1")}
    ),
    "config edited": lambda o: o["spec"].update(config=CONFIG.replace("100", "101")),
    "config not text": lambda o: o["spec"].update(config={"type": "sriov"}),
    "spec gone": lambda o: o.pop("spec"),
    "other name": lambda o: _meta(o).update(name="dra-sriov-other"),
    "other namespace": lambda o: _meta(o).update(namespace="elsewhere"),
}


def test_the_written_shadow_is_converged_and_passes_the_strict_check() -> None:
    obj = written()
    assert lookup(obj)
    check_shadow(obj, RECORD, releasing=False)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_any_difference_is_not_converged(mutation: str) -> None:
    obj = written()
    MUTATIONS[mutation](obj)
    assert not lookup(obj)


def test_a_record_without_a_shadow_uid_never_converges() -> None:
    obj = written()
    assert not lookup(obj, RECORD.with_shadow_uid(""))


def test_a_record_the_contract_refuses_never_converges() -> None:
    invalid = replace(RECORD, interface="bad/name")
    with pytest.raises(ContractError) as err:
        invalid.binding()
    assert err.value.reason == "InvalidInterfaceName"
    assert not lookup(written(), invalid)


def test_the_listed_facts_are_small_and_exact() -> None:
    facts = listed_shadow(written())
    assert (facts.uid, facts.resource_version, facts.deleting) == (SHADOW_UID, "12", False)
    assert facts.finalizers == (PROTECTION_FINALIZER,) and facts.pod_owner_uids == (POD_UID,)
    assert facts.config_digest is not None and CONFIG not in repr(facts)


def strict_accepts(obj: dict[str, Any]) -> bool:
    """What ensure_shadow accepts without a write: the strict check, not deleting, protected."""
    try:
        check_shadow(obj, RECORD, releasing=False)
    except ReasonedError:
        return False
    return not is_deleting(obj) and PROTECTION_FINALIZER in finalizers_of(obj)


@given(st.lists(st.sampled_from(sorted(MUTATIONS)), max_size=4), st.lists(st.text(max_size=3), max_size=2))
def test_converged_implies_the_strict_check_accepts(
    mutations: list[str], extra_finalizers: list[str]
) -> None:
    obj = copy.deepcopy(written())
    for name in mutations:
        try:
            MUTATIONS[name](obj)
        except (KeyError, IndexError, AttributeError):
            continue  # a mutation of something an earlier one removed
    if "finalizers" in _meta(obj):
        _meta(obj)["finalizers"] += extra_finalizers
    # Every mutation list changes the object from its first (always applicable) mutation on.
    assert lookup(obj) == (not mutations)
    if lookup(obj):
        assert strict_accepts(obj)


def test_a_label_someone_else_added_keeps_the_shadow_converged() -> None:
    obj = written()
    _meta(obj)["labels"]["team"] = "rail-a"
    assert lookup(obj)
