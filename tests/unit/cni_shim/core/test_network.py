"""One delegate network from its exact bytes; the parse is shared by every use of the same bytes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cni_shim.core import jsonbytes, network
from cni_shim.errors import CniError
from sriov_lib import rawjson


def test_the_same_bytes_parse_once_and_share_the_result():
    raw = json.dumps({"cniVersion": "1.0.0", "name": "memo-a", "type": "ptp", "mtu": 1400}).encode()
    first = network.parse(raw, "delegate a")
    assert network.parse(raw, "delegate b") is first
    assert first.plugins[0]["mtu"] == rawjson.RawNumber("1400")


def test_a_failed_parse_is_not_remembered_and_keeps_its_callers_wording():
    raw = b'{"name": "memo-bad"}'
    with pytest.raises(CniError, match=": delegate one: "):
        network.parse(raw, "delegate one")
    with pytest.raises(CniError, match=": delegate two: "):
        network.parse(raw, "delegate two")


def test_a_full_memo_starts_over_and_still_answers():
    for i in range(network._PARSED_MAX + 3):
        raw = json.dumps({"name": f"memo-{i}", "type": "ptp"}).encode()
        assert network.parse(raw, "delegate").name == f"memo-{i}"
    assert len(network._PARSED) <= network._PARSED_MAX


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_TREES = st.recursive(
    _SCALARS,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids, max_size=4),
    max_leaves=20,
)


@given(_TREES)
def test_sorted_dump_is_json_with_sorted_keys_and_no_spaces(value):
    assert jsonbytes.dumps_sorted(value) == json.dumps(value, sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize(
    "text",
    [
        "0",
        "1500",
        "-7",
        "0.5",
        "1.0",
        "-0",
        "1.50",
        "1e3",
        "1E3",
        "-0.0",
        "1" * 30,
        "1" * 5000,
        "0.1e-400",
        "1e400",
    ],
)
def test_sorted_dump_keeps_raw_number_text(text):
    doc = rawjson.loads(f'{{"b": {text}, "a": [{text}, "x"], "c": {{"z": true, "y": {text}}}}}')
    assert jsonbytes.dumps_sorted(doc) == f'{{"a":[{text},"x"],"b":{text},"c":{{"y":{text},"z":true}}}}'


def test_sorted_dump_refuses_what_json_cannot_write():
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonbytes.dumps_sorted({"a": object()})
