"""Hostile annotations: binding, registry and the Multus networks annotation.

Each parser must either accept a document or raise a ReasonedError with a stable CamelCase
reason; anything else (KeyError, RecursionError, a hang) is a bug. What a parser accepts must also
survive its own serializer unchanged, or two readers of one annotation could disagree.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from sriov_contract.binding import parse_binding
from sriov_contract.errors import ReasonedError
from sriov_contract.networks import parse_network_selections, selections_to_annotation
from sriov_contract.registry import parse_registry
from tests.fuzz.hostile import hostile_text

VECTORS = Path(__file__).resolve().parents[2] / "fixtures" / "v1" / "valid"
REASON = re.compile(r"[A-Z][A-Za-z0-9]+")
POD_NS = "ai-workloads"


def _seeds(kind: str) -> list[Any]:
    docs = [json.loads(p.read_text()) for p in sorted(VECTORS.glob("*.json"))]
    return [json.loads(d["document"]) for d in docs if d["kind"] == kind]


def assert_typed(err: ReasonedError) -> None:
    assert REASON.fullmatch(err.reason), err.reason
    assert err.message
    event(f"refused: {err.reason}")


@given(hostile_text(_seeds("binding")))
def test_fuzz_binding_annotation(text: str) -> None:
    try:
        binding = parse_binding(text)
    except ReasonedError as err:
        assert_typed(err)
        return
    event("accepted")
    assert parse_binding(binding.to_json()) == binding


@given(hostile_text(_seeds("registry")))
def test_fuzz_registry_annotation(text: str) -> None:
    try:
        registry = parse_registry(text)
    except ReasonedError as err:
        assert_typed(err)
        return
    event("accepted")
    assert parse_registry(registry.to_json()) == registry


NETWORK_SEEDS: list[Any] = [
    [{"name": "rail-a-net", "interface": "net1"}],
    [
        {"name": "dra-sriov-5f1c802f084f6835a710df94404040c5", "namespace": POD_NS, "interface": "dra0"},
        {
            "name": "macvlan",
            "namespace": "other",
            "ips": ["10.1.1.2/24"],
            "mac": "02:00:00:00:00:01",
            "default-route": ["10.1.1.1"],
            "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}],
            "bandwidth": {"ingressRate": 1000, "ingressBurst": 10, "egressRate": 1000, "egressBurst": 10},
            "cni-args": {"x": 1},
            "unknownField": {"kept": [1.50, 12345678901234567890]},
        },
    ],
    [],
]
SHORTHAND = st.lists(
    st.sampled_from(["rail-a", "ns/rail-a", "ns/rail-a@net1", "rail@", "/x", "a/b/c", "a@b@c", " x ", "@"])
    | st.text(max_size=20),
    max_size=5,
).map(",".join)


@given(hostile_text(NETWORK_SEEDS) | SHORTHAND)
def test_fuzz_networks_annotation(text: str) -> None:
    try:
        selections = parse_network_selections(text, POD_NS)
    except ReasonedError as err:
        assert_typed(err)
        return
    event(f"accepted {min(len(selections), 3)}+ selections")
    if not selections:
        return
    again = parse_network_selections(selections_to_annotation(selections), POD_NS)
    assert [s.selection_tuple() for s in again] == [s.selection_tuple() for s in selections]
