"""Deterministic JSON bytes for plugin stdin: keys sorted at every level as libcni does.

Values may mix lossless `RawNumber`s (from configs written by people) with plain Python
numbers (from our own runtime arguments); both serialize to their exact text.
"""

from __future__ import annotations

from sriov_lib import quickjson
from sriov_lib.rawjson import RawNumber

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any


class _NotPlain(Exception):
    """A RawNumber whose text no Python int or float writes back exactly."""


def _number(value: Any) -> Any:
    """json's `default` hook: a RawNumber as the int or float whose own text is its text."""
    if isinstance(value, RawNumber):
        text = value.text
        try:
            whole = int(text)
        except ValueError:
            pass  # a fraction, an exponent, or more digits than int() reads
        else:
            if str(whole) == text:
                return whole
        fraction = float(text)
        if repr(fraction) == text:
            return fraction
        raise _NotPlain
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps_sorted(value: Any) -> str:
    """One pass of json's C encoder when every number can be written by it (what configs
    hold: 1500, true, 0.5); otherwise the walk below, which writes each RawNumber's own text."""
    try:
        return quickjson.dumps(value, sort_keys=True, separators=(",", ":"), default=_number)
    except _NotPlain:
        return _walk(value)


def _walk(value: Any) -> str:
    if isinstance(value, str):
        return quickjson.quote(value)  # what quickjson.dumps(value) writes, without its set-up
    if isinstance(value, dict):
        return "{" + ",".join(f"{_key(k)}:{_walk(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_walk(v) for v in value) + "]"
    if isinstance(value, RawNumber):
        return value.text
    return quickjson.dumps(value)


def _key(key: Any) -> str:
    return quickjson.quote(key) if isinstance(key, str) else quickjson.dumps(key)


def plain(value: Any) -> Any:
    """Lossless tree -> ordinary JSON values (for maps we store and compare, not for plugin bytes)."""
    return quickjson.loads(dumps_sorted(value))
