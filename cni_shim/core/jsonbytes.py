"""Deterministic JSON bytes for plugin stdin: keys sorted at every level as libcni does.

Values may mix lossless `RawNumber`s (from configs written by people) with plain Python
numbers (from our own runtime arguments); both serialize to their exact text.
"""

from __future__ import annotations

import _json

from sriov_contract import quickjson
from sriov_contract.rawjson import RawNumber

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

_quote = _json.encode_basestring_ascii


def dumps_sorted(value: Any) -> str:
    if isinstance(value, str):
        return _quote(value)  # what quickjson.dumps(value) runs, without its calls per string
    if isinstance(value, dict):
        return "{" + ",".join(f"{_key(k)}:{dumps_sorted(value[k])}" for k in sorted(value)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dumps_sorted(v) for v in value) + "]"
    if isinstance(value, RawNumber):
        return value.text
    return quickjson.dumps(value)


def _key(key: Any) -> str:
    return _quote(key) if isinstance(key, str) else quickjson.dumps(key)


def plain(value: Any) -> Any:
    """Lossless tree -> ordinary JSON values (for maps we store and compare, not for plugin bytes)."""
    return quickjson.loads(dumps_sorted(value))
