"""quickjson must be indistinguishable from json for everything the CNI executable reads and writes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_lib import quickjson

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(values, st.sampled_from([None, 1, 4]))
def test_dumps_writes_what_json_writes(value, indent):
    assert quickjson.dumps(value, indent=indent) == json.dumps(value, indent=indent)


@given(values, st.booleans(), st.booleans(), st.sampled_from([None, (",", ":"), (", ", ": ")]))
def test_dumps_options_write_what_json_writes(value, ensure_ascii, sort_keys, separators):
    options = {"ensure_ascii": ensure_ascii, "sort_keys": sort_keys, "separators": separators}
    assert quickjson.dumps(value, **options) == json.dumps(value, **options)


def _outcome(load, data):
    try:
        return "ok", json.dumps(load(data), sort_keys=True)
    except (ValueError, RecursionError) as exc:
        return "error", type(exc).__name__ if isinstance(exc, RecursionError) else "ValueError"


@given(values, st.sampled_from(["", " ", "\n\t", " x", "]"]), st.sampled_from(["", " \r\n"]))
def test_loads_accepts_and_rejects_as_json_does(value, tail, head):
    text = head + json.dumps(value) + tail
    for data in (text, text.encode()):
        assert _outcome(quickjson.loads, data) == _outcome(json.loads, data)


@given(st.text(alphabet='{}[]",:0123456789.eE+-tfrunalsNIy \n\\', max_size=30))
def test_loads_on_arbitrary_text_matches_json(text):
    assert _outcome(quickjson.loads, text.encode()) == _outcome(json.loads, text.encode())


@pytest.mark.parametrize(
    "data",
    [b"\xef\xbb\xbf{}", '{"a": 1}'.encode("utf-16"), '["x"]'.encode("utf-32-le"), b"\xff", b'"\xed\xa0\x80"'],
)
def test_other_encodings_and_bad_bytes_match_json(data):
    assert _outcome(quickjson.loads, data) == _outcome(json.loads, data)


def _pairs(pairs):
    return ("pairs", pairs)


def _refuse(token):
    raise ValueError(f"{token} refused")


@given(st.text(alphabet='{}[]",:0123456789.eE+-tfrunalsNIy \n\\', max_size=30))
def test_loads_with_hooks_matches_json(text):
    hooks: dict[str, Any] = {
        "object_pairs_hook": _pairs,
        "parse_int": str,
        "parse_float": repr,
        "parse_constant": _refuse,
    }
    assert _outcome(lambda d: quickjson.loads(d, **hooks), text) == _outcome(
        lambda d: json.loads(d, **hooks), text
    )


def test_errors_are_jsons_own():
    for bad in ("", "{", '{"a": 1} x', "[NaN, -Infinity", '"\x01"'):
        with pytest.raises(json.JSONDecodeError) as ours:
            quickjson.loads(bad)
        with pytest.raises(json.JSONDecodeError) as theirs:
            json.loads(bad)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError, match="must be str, bytes or bytearray"):
        quickjson.loads(1)  # type: ignore[arg-type]
    cycle: list[object] = []
    cycle.append(cycle)
    for indent in (None, 4):
        with pytest.raises(ValueError, match="Circular reference"):
            quickjson.dumps(cycle, indent=indent)


def test_errors_are_jsons_own_before_json_is_loaded():
    """A CNI process has not imported json when the C scanner meets a malformed document."""
    probe = (
        "import sys; from sriov_lib import quickjson\n"
        "for bad in ('{\"a\": \"x', '[1,', '{\"a\" 1}'):\n"
        "    try:\n        quickjson.loads(bad)\n"
        "    except ValueError as exc:\n        print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True, cwd="."
    )
    expected = []
    for bad in ('{"a": "x', "[1,", '{"a" 1}'):
        with pytest.raises(json.JSONDecodeError) as err:
            json.loads(bad)
        expected.append(f"JSONDecodeError {err.value}")
    assert out.stdout.splitlines() == expected


def test_non_string_keys_and_other_types_fall_back_to_json():
    assert quickjson.dumps({1: (True, None)}, indent=4) == json.dumps({1: (True, None)}, indent=4)
    with pytest.raises(TypeError):
        quickjson.dumps({"a": object()})


def test_the_forward_path_imports_neither_json_nor_socket():
    """The thick shim forwards with quickjson, `_socket` and `posix`: none of these come along
    (`os` and `__future__` alone cost each thick invocation over a millisecond)."""
    probe = (
        "import sys; import cni_shim.main; from cni_shim.thick import forward; "
        "print(sorted(m for m in ('json', 'socket', 're', 'typing', 'base64', 'os', '__future__') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True, cwd="."
    )
    assert out.stdout.strip() == "[]"


class _Opaque:
    pass


def _as_text(value: object) -> object:
    if isinstance(value, _Opaque):
        return "opaque"
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


@given(values, st.booleans())
def test_a_default_hook_writes_what_json_writes(value, sort_keys):
    doc = {"v": value, "o": _Opaque()}
    options: dict[str, Any] = {"sort_keys": sort_keys, "separators": (",", ":"), "default": _as_text}
    assert quickjson.dumps(doc, **options) == json.dumps(doc, **options)
    with pytest.raises(TypeError, match="not JSON serializable"):
        quickjson.dumps({"x": object()}, default=_as_text)
