"""Hypothesis strategies for hostile JSON: valid documents mutated the ways attackers and typos do.

A mutation starts from a real, valid document (so most examples get past the first syntax check
and reach the deeper checks) and applies a few of: a type swap, a removed or added key, a
duplicated key (which Python dicts cannot hold, hence ``Dup``), a huge or non-standard number
token, a deeply nested value, hostile Unicode, and finally maybe truncation. Plain random text is
mixed in too, for the parsers' first line of defence.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st


class Dup:
    """A second occurrence of ``key`` in the same object (emitted verbatim as a duplicate)."""

    def __init__(self, key: str | Dup) -> None:
        self.key: str = key.key if isinstance(key, Dup) else key


class Raw:
    """A token emitted as-is: a number no encoder would write, or pre-built deep nesting."""

    def __init__(self, text: str) -> None:
        self.text = text


def emit(value: Any) -> str:
    """Serialize, honouring ``Dup`` keys and ``Raw`` tokens; everything else like compact json."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        items = (
            f"{json.dumps(k.key if isinstance(k, Dup) else k, ensure_ascii=False)}:{emit(v)}"
            for k, v in value.items()
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(emit(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


_NUMBER_TOKENS = [
    "1e999999",
    "-1e999999",
    "1" * 5000,
    "-0",
    "0.0000000000000000000000000000001",
    "18446744073709551616",
    "1.7976931348623157e309",
    "NaN",
    "Infinity",
    "-Infinity",
    "00012",
    "1.",
    ".5",
    "0x10",
    "+1",
]
_HOSTILE_TEXT = [
    "",
    " ",
    "\u0000",
    "\ud800",
    "\udfff",
    "\u202e",
    "\ufeff",
    "../../etc/passwd",
    "ns/name@eth0",
    "0000:03:00.1",
    "\U0001f600",
    "e\u0301",
]

# Built lazily so a failing example's strategy repr stays readable.
_HUGE_TEXT = st.sampled_from([300, 70_000, 300_000]).map(lambda n: "a" * n)

# Any JSON-able value, small by default but with room for big strings and ints.
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(_HOSTILE_TEXT),
    _HUGE_TEXT,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) in ``doc``, so a mutation can target any nested value."""
    out: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        children = (
            list(node.items())
            if isinstance(node, dict)
            else list(enumerate(node))
            if isinstance(node, list)
            else []
        )
        for key, child in children:
            out.append((node, key))
            stack.append(child)
    return out


@st.composite
def _hostile_value(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["value", "number", "deep-array", "deep-object", "text"]))
    if kind == "number":
        return Raw(draw(st.sampled_from(_NUMBER_TOKENS)))
    if kind in ("deep-array", "deep-object"):
        depth = draw(st.sampled_from([31, 32, 33, 100, 1000, 100_000]))
        opener, closer = ("[", "]") if kind == "deep-array" else ('{"a":', "}")
        return Raw(opener * depth + "1" + closer * depth)
    if kind == "text":
        return draw(st.sampled_from(_HOSTILE_TEXT) | _HUGE_TEXT | st.text())
    return draw(json_values)


@st.composite
def _mutate_once(draw: st.DrawFn, doc: Any) -> Any:
    slots = _slots(doc)
    # Weighted towards edits that keep most of the document, so deeper checks get exercised.
    op = draw(st.sampled_from(["replace"] * 3 + ["delete"] * 2 + ["add"] * 2 + ["duplicate", "root"]))
    if op == "root" or not slots:
        return draw(_hostile_value())
    parent, key = slots[draw(st.integers(0, len(slots) - 1))]
    if op == "replace" or (op in ("delete", "duplicate") and not isinstance(parent, dict)):
        parent[key] = draw(_hostile_value())
    elif op == "delete":
        del parent[key]
    elif op == "add":
        target = parent[key] if isinstance(parent[key], dict | list) else parent
        if isinstance(target, dict):
            target[draw(st.text(max_size=12) | st.sampled_from(list(map(str, target)) or ["x"]))] = draw(
                _hostile_value()
            )
        else:
            target.insert(draw(st.integers(0, len(target))), draw(_hostile_value()))
    else:
        parent[Dup(key)] = draw(_hostile_value() | st.just(copy.deepcopy(parent[key])))
    return doc


@st.composite
def mutated_text(draw: st.DrawFn, seeds: list[Any]) -> str:
    """A seed document after one to three mutations, serialized, sometimes truncated."""
    doc = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 3))):
        doc = draw(_mutate_once(doc))
    text = emit(doc)
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


def hostile_text(seeds: list[Any]) -> st.SearchStrategy[str]:
    """Mostly mutated seeds; some untouched seeds (the valid path must keep working) and raw text."""
    return st.one_of(
        mutated_text(seeds),
        mutated_text(seeds),
        mutated_text(seeds),
        st.sampled_from(seeds).map(emit),
        st.text(),
        st.sampled_from(_HOSTILE_TEXT),
        _HUGE_TEXT,
    )
