"""The Pod's extended-resource claim: reached through its status, owned by it, never reached twice."""

from __future__ import annotations

from typing import Any

import pytest

from sriov_dra.core.extendedclaim import (
    EXTENDED_ALIAS,
    EXTENDED_RESOURCE_ANNOTATION,
    check_extended_claim,
    check_spec_claim,
    extended_claim_name,
    is_extended_resource_claim,
    is_for_pod,
    reached_both_ways,
)

POD_UID = "5b0c1d2e-0000-4000-8000-000000000001"


def _pod(extended: str | None = "p-extended-resources-x1") -> dict[str, Any]:
    status = {"extendedResourceClaimStatus": {"resourceClaimName": extended}} if extended is not None else {}
    return {"metadata": {"namespace": "ns", "name": "p", "uid": POD_UID}, "status": status}


def _claim(*, annotated: bool = True, owner: str = POD_UID, namespace: str = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "namespace": namespace,
        "name": "p-extended-resources-x1",
        "ownerReferences": [{"kind": "Pod", "uid": owner, "controller": True}],
    }
    if annotated:
        meta["annotations"] = {EXTENDED_RESOURCE_ANNOTATION: "true"}
    return {"metadata": meta}


def test_the_status_names_the_claim_and_nothing_else_does() -> None:
    assert extended_claim_name(_pod()) == "p-extended-resources-x1"
    assert extended_claim_name(_pod(None)) == ""
    assert extended_claim_name({}) == ""
    assert extended_claim_name({"status": {"extendedResourceClaimStatus": {"requestMappings": []}}}) == ""


def test_only_the_annotations_one_valid_value_marks_a_scheduler_claim() -> None:
    assert is_extended_resource_claim(_claim())
    assert not is_extended_resource_claim(_claim(annotated=False))
    assert not is_extended_resource_claim({})
    assert not is_extended_resource_claim({"metadata": {"annotations": {EXTENDED_RESOURCE_ANNOTATION: "p"}}})


def test_ownership_needs_the_namespace_and_a_controller_reference_to_the_pod_uid() -> None:
    assert is_for_pod(_pod(), _claim())
    assert not is_for_pod(_pod(), _claim(owner="other"))
    assert not is_for_pod(_pod(), _claim(namespace="elsewhere"))
    not_controller = _claim()
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert not is_for_pod(_pod(), not_controller)
    assert not is_for_pod({}, {})


def test_the_schedulers_claim_for_this_pod_is_accepted() -> None:
    assert check_extended_claim(_pod(), _claim()) is None
    assert check_spec_claim(_claim(annotated=False)) is None
    assert reached_both_ways(_pod(), ["a", "b"]) is None
    assert reached_both_ways(_pod(None), ["a", ""]) is None


@pytest.mark.parametrize(
    ("refusal", "reason"),
    [
        (lambda: check_extended_claim(_pod(), _claim(annotated=False)), "UnsupportedManagedClaimKind"),
        (lambda: check_extended_claim(_pod(), _claim(owner="other")), "ClaimNotOwnedByPod"),
        (lambda: check_spec_claim(_claim()), "UnsupportedManagedClaimKind"),
        (lambda: reached_both_ways(_pod(), ["p-extended-resources-x1"]), "UnsupportedManagedClaimKind"),
    ],
)
def test_what_stays_unsupported_is_refused_with_its_stable_reason(refusal: Any, reason: str) -> None:
    got = refusal()
    assert got is not None and got[0] == reason and got[1]


def test_the_extended_alias_sorts_after_every_pod_claim_name_and_is_none_of_them() -> None:
    assert EXTENDED_ALIAS > "zzzz" and EXTENDED_ALIAS > "9-claim"
    assert not EXTENDED_ALIAS[0].isalnum()
