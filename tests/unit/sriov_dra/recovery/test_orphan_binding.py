"""How the orphan scan reads each shadow's binding: the canonical text the driver wrote is matched
against its record without a strict parse; every other text is parsed strictly, with the same
outcome a parse of the canonical text would have had."""

from __future__ import annotations

import json
from typing import Any

import pytest

import sriov_dra.recovery.orphans
from sriov_contract.binding import parse_binding
from sriov_contract.keys import BINDING_ANNOTATION
from sriov_dra.recovery.orphans import ORPHAN, checkpoint_bindings, correlate
from tests.fakes.driver_env import NODE_UID, Env, vf_config

VFS = ("0000-17-00-1", "0000-17-00-2", "0000-17-00-3")


@pytest.fixture
def prepared(env: Env) -> Env:
    for i, vf in enumerate(VFS):
        pod = env.pod(name=f"pod{i}", claims=[{"name": "vfs", "resourceClaimName": f"c{i}"}])
        ref = env.claim(f"c{i}", pod, [vf], [vf_config(netAttachDefName="rail-a")])
        assert env.prepare(ref).error == ""
    return env


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    def counting(text: str) -> Any:
        seen.append(text)
        return parse_binding(text)

    monkeypatch.setattr(sriov_dra.recovery.orphans, "parse_binding", counting)
    return seen


def annotate(shadow: dict[str, Any], text: str) -> dict[str, Any]:
    meta = shadow["metadata"]
    return {**shadow, "metadata": {**meta, "annotations": {**meta["annotations"], BINDING_ANNOTATION: text}}}


def reencoded(shadow: dict[str, Any]) -> dict[str, Any]:
    """The same binding in other JSON: keys reversed, spaces after separators."""
    doc = json.loads(shadow["metadata"]["annotations"][BINDING_ANNOTATION])
    return annotate(shadow, json.dumps(dict(reversed(doc.items()))))


def test_canonical_annotations_need_no_parse_and_match_their_records(prepared: Env, parses) -> None:
    reports = correlate(prepared.shadows(), prepared.checkpoint.snapshot_all(), NODE_UID)
    assert parses == []
    assert [r.status for r in reports] == ["Ready"] * len(VFS)
    recorded = checkpoint_bindings(prepared.checkpoint.snapshot_all())
    assert {r.attachment_id for r in reports} == set(recorded)


def test_reencoded_annotations_are_parsed_and_give_the_same_reports(prepared: Env, parses) -> None:
    records = prepared.checkpoint.snapshot_all()
    canonical = correlate(prepared.shadows(), records, NODE_UID)
    other = correlate([reencoded(s) for s in prepared.shadows()], records, NODE_UID)
    assert len(parses) == len(VFS)
    assert other == canonical


def test_an_edited_annotation_is_a_conflict_whichever_way_it_is_encoded(prepared: Env) -> None:
    shadow = prepared.shadows()[0]
    doc = json.loads(shadow["metadata"]["annotations"][BINDING_ANNOTATION])
    doc["interface"] = "net9"
    for text in (json.dumps(doc, separators=(",", ":")), json.dumps(doc)):
        (report, *_) = [
            r
            for r in correlate([annotate(shadow, text)], prepared.checkpoint.snapshot_all(), NODE_UID)
            if r.name == shadow["metadata"]["name"]
        ]
        assert report.status == "Conflict" and "another source, PCI address or interface" in report.detail


def test_a_canonical_annotation_under_another_name_is_still_refused(prepared: Env) -> None:
    a, b = prepared.shadows()[:2]
    # b's object carrying a's exact binding text: the text matches a record, the place does not
    swapped = annotate(b, a["metadata"]["annotations"][BINDING_ANNOTATION])
    (report,) = correlate([swapped], prepared.checkpoint.snapshot_all(), NODE_UID)
    assert report.status == "Conflict" and "another namespace or name" in report.detail


def test_an_unreadable_annotation_is_an_orphan_with_the_parse_error(prepared: Env) -> None:
    shadow = prepared.shadows()[0]
    (report,) = correlate([annotate(shadow, '{"version":1')], prepared.checkpoint.snapshot_all(), NODE_UID)
    assert report.status == ORPHAN and report.detail.startswith("unreadable binding:")
    assert report.attachment_id == ""
