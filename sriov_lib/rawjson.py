"""Lossless JSON: numbers keep their source text, object key order survives, duplicates are visible.

CNI configurations and network selections written by other people pass through our code and
come out again. Python's default decoding turns 12345678901234567890.0 into a float and 0.50
into 0.5, and silently keeps only the last of two duplicate keys; each of those would change
what a delegate plugin sees. This module decodes into plain containers whose numbers are
`RawNumber` (the exact token text) and whose objects are `JsonObject` (a dict that records
which keys appeared more than once), and serializes them back compactly and deterministically.

Standard library only: the CNI shim imports this on its hot path.
"""

from __future__ import annotations

from collections import Counter

from sriov_lib import quickjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Final, TypeAlias


class RawNumber:
    """A JSON number kept as its exact source token; immutable, equal by its text.

    Written out rather than a dataclass: `dataclasses` and each class it builds cost the CNI
    shim's every start-up milliseconds, and this module is all its DEL path needs of the contract.
    """

    __slots__ = ("text",)
    text: str

    def __init__(self, text: str) -> None:
        object.__setattr__(self, "text", text)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"RawNumber is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"RawNumber is immutable; cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        return other.text == self.text if isinstance(other, RawNumber) else NotImplemented

    def __hash__(self) -> int:
        return hash((RawNumber, self.text))

    def __repr__(self) -> str:
        return f"RawNumber(text={self.text!r})"

    def is_integer(self) -> bool:
        # JSON's int production, -?(0|[1-9][0-9]*); the text is already a valid JSON number.
        digits = self.text[1:] if self.text.startswith("-") else self.text
        return digits.isascii() and digits.isdigit() and (digits == "0" or not digits.startswith("0"))


JsonValue: TypeAlias = "JsonObject | list[JsonValue] | str | RawNumber | bool | None"


class JsonObject(dict[str, JsonValue]):
    """A decoded JSON object; `duplicate_keys` names the keys that occurred more than once."""

    duplicate_keys: frozenset[str] = frozenset()


class RawJsonError(ValueError):
    """The text is not a single well-formed JSON value."""


# Deeper documents are refused as malformed: the stdlib decoder and dumps() recurse per level and
# would otherwise hit the interpreter's recursion limit (dumps at about 330 levels) with a bare
# RecursionError. No CNI configuration or network selection comes anywhere near this depth.
MAX_DEPTH: Final = 128


def _object(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    obj = JsonObject(pairs)
    if len(obj) != len(pairs):
        counts = Counter(k for k, _ in pairs)
        obj.duplicate_keys = frozenset(k for k, n in counts.items() if n > 1)
    return obj


def _reject_constant(token: str) -> JsonValue:
    raise RawJsonError(f"{token} is not a JSON number")


def loads(text: str | bytes) -> JsonValue:
    """Decode one JSON value losslessly; raise RawJsonError on anything that is not strict JSON."""
    try:
        value: JsonValue = quickjson.loads(
            text,
            object_pairs_hook=_object,
            parse_int=RawNumber,
            parse_float=RawNumber,
            parse_constant=_reject_constant,
        )
    except ValueError as exc:  # json's JSONDecodeError, a UnicodeDecodeError, or a hook's refusal
        raise RawJsonError(str(exc)) from exc
    except RecursionError:
        raise RawJsonError(f"nests deeper than {MAX_DEPTH} levels") from None
    _check_depth(value)
    return value


def _check_depth(value: JsonValue) -> None:
    stack: list[tuple[JsonValue, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > MAX_DEPTH:
            raise RawJsonError(f"nests deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children)


def has_surrogate(text: str) -> bool:
    """A lone UTF-16 surrogate (from a "\ud800" escape), which UTF-8 cannot carry: one C-level
    pass per string (the orphan scan checks 8000 shadows'), and no `re` on the CNI path."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def _string(s: str) -> str:
    # A lone surrogate cannot be written as UTF-8; keep it escaped.
    return quickjson.dumps(s, ensure_ascii=has_surrogate(s))


def dumps(value: JsonValue) -> str:
    """Serialize compactly: no whitespace, keys in their stored order, numbers as their raw text."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, RawNumber):
        return value.text
    if value is None:
        return "null"
    return "true" if value else "false"
