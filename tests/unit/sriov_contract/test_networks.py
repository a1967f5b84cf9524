import operator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_contract.errors import ReasonedError
from sriov_contract.networks import (
    Bandwidth,
    PortMapping,
    parse_network_selections,
    selections_to_annotation,
)
from sriov_lib import rawjson

POD_NS = "ai-workloads"


def one(text):
    (sel,) = parse_network_selections(text, POD_NS)
    return sel


def bad(text):
    with pytest.raises(ReasonedError) as err:
        parse_network_selections(text, POD_NS)
    assert err.value.reason == "InvalidNetworksAnnotation"
    return err.value


@pytest.mark.parametrize("text", [None, ""])
def test_absent_or_empty_is_no_selections(text):
    assert parse_network_selections(text, POD_NS) == []


def test_empty_json_list_is_no_selections():
    assert parse_network_selections("[]", POD_NS) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("net1", [("ai-workloads", "net1", None)]),
        ("infra/net1", [("infra", "net1", None)]),
        ("net1@eth1", [("ai-workloads", "net1", "eth1")]),
        (" infra / net1 @ my_IF , net2 ", [("infra", "net1", "my_IF"), ("ai-workloads", "net2", None)]),
        (
            "net1,,net2",
            [("ai-workloads", "net1", None), ("ai-workloads", "", None), ("ai-workloads", "net2", None)],
        ),
        ("null", [("ai-workloads", "null", None)]),
        ("a@", [("ai-workloads", "a", None)]),
        ("net1@abcdefghijklmno", [("ai-workloads", "net1", "abcdefghijklmno")]),
    ],
)
def test_shorthand_grammar(text, expected):
    sels = parse_network_selections(text, POD_NS)
    assert [s.selection_tuple() for s in sels] == expected
    assert all(s.shorthand for s in sels)


def test_shorthand_raw_is_minimal_and_keeps_only_explicit_parts():
    assert one("net1").raw == {"name": "net1"}
    assert one("infra/net1@eth1").raw == {"name": "net1", "namespace": "infra", "interface": "eth1"}


def test_shorthand_trims_go_whitespace_only():
    # \x1c is whitespace to Python's strip() but not to Go's TrimSpace, so the name stays invalid.
    bad("\x1cnet1")
    assert one("\u00a0net1\u3000").name == "net1"


@pytest.mark.parametrize(
    "text",
    [
        "a/b/c",
        "a@b@c",
        "Net1",
        "-net",
        "net-",
        "net_1",
        "Infra/net1",
        "net1@abcdefghijklmnop",
        "net1@a/b",
        "net1@a\tb",
        "net1@\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9",
    ],
)
def test_shorthand_rejections(text):
    err = bad(text)
    assert "fix or remove" in err.message


def test_json_form_is_chosen_by_any_marker_character():
    for text in ('[{"name":"a"}]', '{"name":"a"}', '"a"', 'a"'):
        if text.startswith("["):
            assert one(text).name == "a"
        else:
            bad(text)


def test_json_known_fields_and_normalization():
    sel = one(
        '[{"name":"n","interface":"eth9","ips":["10.1.1.1","2001:db8::1/64"],'
        '"mac":"02:00:00:00:00:01","infiniband-guid":"00:01:02:03:04:05:06:07",'
        '"default-route":["10.1.1.254"],"portMappings":[{"hostPort":80,"containerPort":8080,'
        '"protocol":"tcp","hostIP":"1.2.3.4"}],"bandwidth":{"ingressRate":1,"ingressBurst":2,'
        '"egressRate":3,"egressBurst":4},"cni-args":{"x":1},"deviceID":"0000:03:00.1"}]'
    )
    assert sel.selection_tuple() == (POD_NS, "n", "eth9")
    assert sel.ips == ("10.1.1.1", "2001:db8::1/64")
    assert sel.mac == "02:00:00:00:00:01"
    assert sel.infiniband_guid == "00:01:02:03:04:05:06:07"
    assert sel.default_route == ("10.1.1.254",)
    assert sel.port_mappings == (PortMapping(80, 8080, "tcp", "1.2.3.4"),)
    assert sel.bandwidth == Bandwidth(1, 2, 3, 4)
    assert sel.cni_args == {"x": rawjson.RawNumber("1")}
    assert sel.device_id == "0000:03:00.1"
    assert not sel.shorthand


def test_json_defaults():
    sel = one('[{"name":"n","namespace":""}]')
    assert sel.selection_tuple() == (POD_NS, "n", None)
    assert sel.ips == () and sel.mac is None and sel.bandwidth is None and sel.cni_args is None
    assert sel.device_id is None and sel.infiniband_guid is None


def test_interface_request_is_a_fallback_only():
    assert one('[{"name":"n","interfaceRequest":"r1"}]').interface == "r1"
    assert one('[{"name":"n","interface":"i1","interfaceRequest":"r1"}]').interface == "i1"


def test_keys_match_case_insensitively_like_go_and_null_is_ignored():
    sel = one('[{"NAME":"n","Namespace":"infra","name":null,"Bandwidth":{"INGRESSRATE":5}}]')
    assert sel.selection_tuple() == ("infra", "n", None)
    assert sel.bandwidth == Bandwidth(5, 0, 0, 0)


def test_later_key_wins_regardless_of_spelling():
    assert one('[{"name":"exact","NAME":"folded"}]').name == "folded"
    # Go assigns sequentially, so the later key wins regardless of spelling.
    assert one('[{"NAME":"folded","name":"exact"}]').name == "exact"


def test_raw_keeps_unknown_fields_order_and_numbers():
    text = '[{"zeta":1.50,"name":"n","ipam-claim-reference":"c","cni-args":{"b":1e3,"a":[]}}]'
    sel = one(text)
    assert list(sel.raw) == ["zeta", "name", "ipam-claim-reference", "cni-args"]
    assert selections_to_annotation([sel]) == text


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"name":"a"}', "list of objects"),
        ("[null]", "JSON object"),
        ('["a"]', "JSON object"),
        ('[{"name":"a"}', "malformed"),
        ('[{"name":1}]', "name must be a string"),
        ('[{"name":"a","ips":"10.0.0.1"}]', "ips must be a list"),
        ('[{"name":"a","ips":[1]}]', "ips must be a string"),
        ('[{"name":"a","ips":["10.0.0.300"]}]', "not an IP"),
        ('[{"name":"a","ips":["10.0.0.1/33"]}]', "not an IP"),
        ('[{"name":"a","ips":["10.0.0.1/024"]}]', "not an IP"),
        ('[{"name":"a","ips":["10.0.0.1/255.255.255.0"]}]', "not an IP"),
        ('[{"name":"a","ips":["x/24"]}]', "not an IP"),
        ('[{"name":"a","ips":["fe80::1%eth0"]}]', "not an IP"),
        ('[{"name":"a","ips":["010.0.0.1"]}]', "not an IP"),
        ('[{"name":"a","mac":"02:00:00:00:00"}]', "mac"),
        ('[{"name":"a","mac":"02:00-00:00:00:01"}]', "mac"),
        ('[{"name":"a","infiniband-guid":"zz"}]', "infiniband-guid"),
        ('[{"name":"a","default-route":["nope"]}]', "default-route"),
        ('[{"name":"a","cni-args":[]}]', "cni-args"),
        ('[{"name":"a","portMappings":[1]}]', "objects"),
        ('[{"name":"a","portMappings":[{"hostPort":1.5}]}]', "integer"),
        ('[{"name":"a","portMappings":[{"hostPort":"80"}]}]', "integer"),
        ('[{"name":"a","bandwidth":{"ingressRate":1e3}}]', "integer"),
        ('[{"name":"a","bandwidth":{"ingressRate":9223372036854775808}}]', "64-bit"),
        ('[{"name":"a","bandwidth":7}]', "objects"),
    ],
)
def test_json_rejections_name_the_item(text, fragment):
    err = bad(text)
    assert fragment in err.message


@pytest.mark.parametrize(
    "mac",
    [
        "02:00:00:00:00:01",
        "02-00-00-00-00-01",
        "0200.0000.0001",
        "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01",
    ],
)
def test_go_mac_forms(mac):
    assert one('[{"name":"a","mac":"' + mac + '"}]').mac == mac


def test_empty_default_route_entry_is_allowed_like_go():
    assert one('[{"name":"a","default-route":[""]}]').default_route == ("",)


def test_int64_bounds_accepted():
    sel = one('[{"name":"a","bandwidth":{"egressBurst":-9223372036854775808}}]')
    assert sel.bandwidth == Bandwidth(0, 0, 0, -(2**63))


def test_selections_to_annotation_turns_shorthand_into_json():
    sels = parse_network_selections("infra/a@eth1,b", POD_NS)
    text = selections_to_annotation(sels)
    assert text == '[{"name":"a","namespace":"infra","interface":"eth1"},{"name":"b"}]'
    assert parse_network_selections(text, POD_NS) == sels


names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True)
ifnames = st.from_regex(r"[A-Za-z0-9_.-]{1,15}", fullmatch=True)


@given(st.lists(st.tuples(st.none() | names, names, st.none() | ifnames), max_size=5))
def test_shorthand_round_trips_through_json(items):
    text = ",".join((f"{ns}/" if ns else "") + n + (f"@{i}" if i else "") for ns, n, i in items)
    sels = parse_network_selections(text, POD_NS)
    assert [s.selection_tuple() for s in sels] == [(ns or POD_NS, n, i) for ns, n, i in items]
    again = parse_network_selections(selections_to_annotation(sels), POD_NS)
    assert again == sels


def test_selections_are_equal_by_their_validated_fields_not_their_spelling():
    short = one("ns1/net1@eth1")
    spelled = one('[{"name": "net1", "namespace": "ns1", "interface": "eth1", "x-note": 1}]')
    assert short.shorthand and not spelled.shorthand and short.raw != spelled.raw
    assert short == spelled and not operator.ne(short, spelled)  # tuple's own != would differ
    assert hash(short) == hash(spelled) and len({short, spelled}) == 1
    other = one("ns1/net1@eth2")
    assert short != other and not operator.eq(short, other)
    assert short != short.selection_tuple()  # a plain tuple of the same values is not a selection
