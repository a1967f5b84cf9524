import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_lib import rawjson
from sriov_lib.rawjson import JsonObject, RawJsonError, RawNumber


@pytest.mark.parametrize("token", ["9000", "1e3", "0.50", "12345678901234567890", "-0", "1E+2", "-1.25e-7"])
def test_numbers_keep_their_exact_text(token):
    text = '{"mtu":' + token + "}"
    value = rawjson.loads(text)
    assert value == {"mtu": RawNumber(token)}
    assert rawjson.dumps(value) == text


def test_key_order_and_unknown_fields_survive():
    text = '{"z":1,"a":{"y":[true,false,null],"b":"x"},"m":"é"}'
    assert rawjson.dumps(rawjson.loads(text)) == text


def test_whitespace_is_dropped_for_compact_deterministic_output():
    assert rawjson.dumps(rawjson.loads(' { "a" : [ 1 , 2 ] } ')) == '{"a":[1,2]}'


def test_duplicate_keys_are_recorded_per_object():
    value = rawjson.loads('{"a":1,"b":{"c":1,"c":2},"a":3}')
    assert isinstance(value, JsonObject)
    assert value.duplicate_keys == {"a"}
    assert value["a"] == RawNumber("3")
    inner = value["b"]
    assert isinstance(inner, JsonObject)
    assert inner.duplicate_keys == {"c"}


def test_no_duplicates_means_empty_set():
    value = rawjson.loads('{"a":1}')
    assert isinstance(value, JsonObject)
    assert value.duplicate_keys == frozenset()


@pytest.mark.parametrize("text", ["NaN", '{"a":Infinity}', "-Infinity", "{", '{"a":1} x', "", b"\xff"])
def test_non_json_is_rejected(text):
    with pytest.raises(RawJsonError):
        rawjson.loads(text)


def test_lone_surrogate_stays_escaped_and_encodable():
    value = rawjson.loads('["\\ud800", "ok\\u00e9"]')
    out = rawjson.dumps(value)
    assert out == '["\\ud800","oké"]'
    out.encode()


def test_is_integer():
    assert RawNumber("-12").is_integer()
    assert not RawNumber("1.0").is_integer()
    assert not RawNumber("1e3").is_integer()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.text()
    | st.integers().map(str).map(RawNumber)
    | st.floats(allow_nan=False, allow_infinity=False).map(repr).map(RawNumber),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=5), children, max_size=4).map(JsonObject)
    ),
    max_leaves=20,
)


@given(json_values)
def test_round_trip_is_lossless_and_stable(value):
    text = rawjson.dumps(value)
    again = rawjson.loads(text)
    assert again == value
    assert rawjson.dumps(again) == text
    # The compact form is still JSON any standard reader accepts.
    json.loads(text)


def test_raw_number_is_an_immutable_value():
    one = RawNumber("1.0")
    assert one == RawNumber("1.0") and one != RawNumber("1") and one != "1.0"
    assert len({one, RawNumber("1.0"), RawNumber("1")}) == 2
    assert repr(one) == "RawNumber(text='1.0')"
    with pytest.raises(AttributeError):
        one.text = "2"
    with pytest.raises(AttributeError):
        del one.text
