"""One delegate network from its exact bytes; the parse is shared by every use of the same bytes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cni_shim.core import jsonbytes, network
from cni_shim.errors import CniError
from sriov_contract import rawjson


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


def test_sorted_dump_keeps_raw_number_text():
    assert jsonbytes.dumps_sorted(rawjson.loads(b'{"b": 1.50, "a": [1e3]}')) == '{"a":[1e3],"b":1.50}'
