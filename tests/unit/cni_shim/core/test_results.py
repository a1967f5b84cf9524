"""Result conversion between CNI versions and Multus's network-status entries."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cni_shim.core import netstatus, results
from cni_shim.errors import CniError

CURRENT = {
    "cniVersion": "1.1.0",
    "interfaces": [
        {
            "name": "eth0",
            "mac": "02:00:00:00:00:01",
            "mtu": 1500,
            "sandbox": "/run/netns/x",
            "pciID": "0000:03:00.1",
        }
    ],
    "ips": [
        {"address": "10.0.0.2/24", "gateway": "10.0.0.1", "interface": 0},
        {"address": "fd00::2/64", "gateway": "fd00::1", "interface": 0},
    ],
    "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1", "mtu": 1400}, {"dst": "::/0"}],
    "dns": {"nameservers": ["10.0.0.53"]},
}


def test_down_conversion_to_0_4_adds_versions_and_drops_1_1_fields():
    out = results.convert(results.to_current(CURRENT, "1.1.0"), "0.4.0")
    assert out["interfaces"] == [{"name": "eth0", "mac": "02:00:00:00:00:01", "sandbox": "/run/netns/x"}]
    assert [ip["version"] for ip in out["ips"]] == ["4", "6"]
    assert out["routes"] == [{"dst": "0.0.0.0/0", "gw": "10.0.0.1"}, {"dst": "::/0"}]


def test_legacy_conversion_keeps_the_first_address_per_family_with_its_routes():
    out = results.convert(results.to_current(CURRENT, "1.1.0"), "0.2.0")
    assert out == {
        "cniVersion": "0.2.0",
        "ip4": {
            "ip": "10.0.0.2/24",
            "gateway": "10.0.0.1",
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1"}],
        },
        "ip6": {"ip": "fd00::2/64", "gateway": "fd00::1", "routes": [{"dst": "::/0"}]},
        "dns": {"nameservers": ["10.0.0.53"]},
    }
    assert results.to_current(out, "0.2.0")["ips"][0] == {"address": "10.0.0.2/24", "gateway": "10.0.0.1"}


def test_legacy_conversion_without_ips_fails_with_a_decode_error():
    with pytest.raises(CniError) as err:
        results.convert({"cniVersion": "1.1.0", "interfaces": [{"name": "eth0"}]}, "0.1.0")
    assert err.value.code == 6 and err.value.reason == "ResultNotConvertible"


def test_missing_result_version_means_the_request_version():
    assert results.to_current({"ip4": {"ip": "10.1.0.2/24"}}, "0.2.0")["ips"] == [{"address": "10.1.0.2/24"}]


@pytest.mark.parametrize("bad", [[], {"ips": "x"}, {"ips": [{"address": "nope"}]}, {"cniVersion": "7.0.0"}])
def test_malformed_results_are_refused(bad):
    with pytest.raises(CniError):
        results.to_current(bad, "1.0.0")


@given(
    st.lists(st.ip_addresses(), min_size=1, max_size=4),
    st.sampled_from(["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]),
)
def test_round_trip_through_any_modern_version_keeps_addresses(addresses, version):
    current = {
        "cniVersion": "1.1.0",
        "interfaces": [{"name": "eth0", "sandbox": "/n"}],
        "ips": [{"address": f"{a}/{a.max_prefixlen}", "interface": 0} for a in addresses],
    }
    back = results.to_current(results.convert(current, version), version)
    assert back["ips"] == current["ips"]
    assert back["interfaces"] == current["interfaces"]


def test_network_status_single_interface_entry_is_multus_shaped():
    entries = netstatus.statuses(results.to_current(CURRENT, "1.1.0"), "cbr0", master=True)
    assert entries == [
        {
            "name": "cbr0",
            "interface": "eth0",
            "ips": ["10.0.0.2", "fd00::2"],
            "mac": "02:00:00:00:00:01",
            "mtu": 1500,
            "default": True,
            "dns": {"nameservers": ["10.0.0.53"]},
            "gateway": ["10.0.0.1"],
        }
    ]
    assert netstatus.render(entries).startswith('[{\n    "name": "cbr0",\n    "interface": "eth0",')


def test_network_status_multi_interface_only_sandboxed_and_default_follows_gateway_ip():
    result = {
        "interfaces": [
            {"name": "veth1"},
            {"name": "eth0", "sandbox": "/n"},
            {"name": "eth1", "sandbox": "/n"},
        ],
        "ips": [
            {"address": "10.0.0.2/24", "interface": 1},
            {"address": "10.1.0.2/24", "gateway": "10.1.0.1", "interface": 2},
            {"address": "10.9.0.9/24"},
        ],
    }
    entries = netstatus.statuses(result, "ns/n", master=True)
    assert [(e["interface"], e.get("ips"), e.get("default", False)) for e in entries] == [
        ("eth0", ["10.0.0.2"], False),
        ("eth1", ["10.1.0.2", "10.9.0.9"], True),
    ]
    # IPAM-style results with no interfaces give no entry at all (Multus)
    assert netstatus.statuses({"ips": [{"address": "10.0.0.2/24"}]}, "x", master=False) == []
    assert json.loads(netstatus.render(entries))[1]["default"] is True


_OCTETS = st.sampled_from(
    ["0", "1", "9", "10", "99", "100", "199", "249", "250", "255", "256", "01", "00", ""]
)
_PREFIXES = st.sampled_from(
    ["", "/0", "/8", "/24", "/32", "/33", "/03", "/032", "/", "/255.255.255.0", "/24\n"]
)


@given(st.lists(_OCTETS, min_size=3, max_size=5), _PREFIXES)
def test_address_family_fast_path_agrees_with_ipaddress(octets, prefix):
    """Plain IPv4 text skips ipaddress; anything it accepts or refuses must come out the same."""
    address = ".".join(octets) + prefix
    try:
        expected: str | None = str(ipaddress.ip_interface(address).version)
    except ValueError:
        expected = None
    try:
        current = results.to_current({"cniVersion": "1.0.0", "ips": [{"address": address}]}, "")
        got: str | None = results.convert(current, "0.4.0")["ips"][0]["version"]
    except CniError:
        got = None
    assert got == expected


def test_ipv6_and_netmask_addresses_still_go_through_ipaddress():
    converted = results.convert(
        {"ips": [{"address": "fd00::2/64"}, {"address": "10.0.0.2/255.255.255.0"}]}, "0.4.0"
    )
    assert [ip["version"] for ip in converted["ips"]] == ["6", "4"]
