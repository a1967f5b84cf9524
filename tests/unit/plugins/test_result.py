import pytest
from hypothesis import given
from hypothesis import strategies as st

from plugins.result import from_current, passthrough, to_current
from plugins.skel import CniError

CURRENT = {
    "interfaces": [{"name": "net1", "mac": "02:00:00:00:00:01", "mtu": 1500, "sandbox": "/run/netns/x"}],
    "ips": [
        {"address": "192.0.2.5/24", "gateway": "192.0.2.1", "interface": 0},
        {"address": "2001:db8::5/64", "interface": 0},
    ],
    "routes": [{"dst": "10.0.0.0/8"}, {"dst": "2001:db8:1::/48"}],
}


def test_040_adds_ip_versions_and_drops_new_interface_keys():
    out = from_current(CURRENT, "0.4.0")
    assert out["cniVersion"] == "0.4.0"
    assert [ip["version"] for ip in out["ips"]] == ["4", "6"]
    assert out["interfaces"] == [{"name": "net1", "mac": "02:00:00:00:00:01", "sandbox": "/run/netns/x"}]


def test_020_keeps_first_address_per_family_with_its_routes():
    out = from_current(CURRENT, "0.2.0")
    assert out["ip4"] == {"ip": "192.0.2.5/24", "gateway": "192.0.2.1", "routes": [{"dst": "10.0.0.0/8"}]}
    assert out["ip6"] == {"ip": "2001:db8::5/64", "routes": [{"dst": "2001:db8:1::/48"}]}
    assert "interfaces" not in out


def test_020_without_ip_fails_like_libcni():
    with pytest.raises(CniError, match="no valid IP addresses"):
        from_current({"interfaces": []}, "0.2.0")


@given(
    version=st.sampled_from(["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]),
    octet=st.integers(1, 254),
)
def test_round_trip_through_any_family_keeps_addresses(version, octet):
    current = {"ips": [{"address": f"10.1.2.{octet}/24", "gateway": "10.1.2.254"}], "routes": []}
    assert to_current(from_current(current, version))["ips"] == current["ips"]


def test_legacy_result_is_lifted():
    legacy = {
        "cniVersion": "0.2.0",
        "ip4": {"ip": "10.0.0.2/24", "gateway": "10.0.0.1", "routes": [{"dst": "0.0.0.0/0"}]},
    }
    assert to_current(legacy) == {
        "ips": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1"}],
        "routes": [{"dst": "0.0.0.0/0"}],
    }


def test_passthrough_prefers_prev_result():
    prev = {"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.2/24"}]}
    assert passthrough({"cniVersion": "1.1.0", "prevResult": prev}, "eth0", "/n") == {
        **prev,
        "cniVersion": "1.1.0",
    }
    assert passthrough({"cniVersion": "1.0.0"}, "eth0", "/n")["interfaces"] == [
        {"name": "eth0", "sandbox": "/n"}
    ]
