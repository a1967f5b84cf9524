"""The resourceName path's pure parts: the per-ADD device map, Multus's injection and device-info
as the NAD client reads it."""

from __future__ import annotations

import json

import pytest

from cni_shim.core import delegates, kubeletcheckpoint, netstatus, resourcenames
from cni_shim.core.network import parse


def test_devices_are_merged_across_containers_and_sorted_per_resource() -> None:
    merged = resourcenames.merge([("r", ["b"]), ("s", ["x"]), ("r", ["c", "a"])])
    assert merged == {"r": ("a", "b", "c"), "s": ("x",)}


def test_each_resource_hands_out_its_devices_in_turn_then_nothing() -> None:
    cursor = resourcenames.Cursor({"r": ("a", "b")})
    assert [cursor.take("r"), cursor.take("other"), cursor.take("r"), cursor.take("r")] == ["a", "", "b", ""]


def test_the_device_plugins_file_names_slashes_as_dashes() -> None:
    assert resourcenames.device_info_source("openshift.io/legacy_vfs", "0000:03:00.5") == (
        "/var/run/k8s.cni.cncf.io/devinfo/dp/openshift.io-legacy_vfs-0000:03:00.5-device.json"
    )


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"name":"n","type":"sriov","mtu":9000}', [None]),
        (b'{"name":"n","plugins":[{"type":"sriov"},{"type":"tuning"}]}', [0, 1]),
    ],
)
def test_device_id_and_pci_bus_id_go_top_level_or_into_every_plugin(
    raw: bytes, where: list[int | None]
) -> None:
    cand = delegates.Candidate(name="ns/n", network=parse(raw, "t"))
    out = delegates.with_device_id(cand, "0000:03:00.5", "t")
    doc = json.loads(out.network.raw)
    for index in where:
        target = doc if index is None else doc["plugins"][index]
        assert (target["deviceID"], target["pciBusID"]) == ("0000:03:00.5", "0000:03:00.5")
    assert out.device_id == "0000:03:00.5"
    assert list(doc) == sorted(doc)  # re-written with sorted keys, as Go's map encoding


def test_device_info_is_read_as_the_nad_client_decodes_it() -> None:
    raw = b'{"Type":"pci","version":"1.1.0","PCI":{"pci-address":"0000:03:00.5","rdma-device":""},"extra":1}'
    assert netstatus.load_device_info(raw) == {
        "type": "pci",
        "version": "1.1.0",
        "pci": {"pci-address": "0000:03:00.5"},
    }
    assert netstatus.load_device_info(b'{"pci":{"pci-address":5}}') is None
    assert netstatus.load_device_info(b"[]") is None
    assert netstatus.load_device_info(b"{") is None


def test_device_info_sits_between_dns_and_gateway() -> None:
    result = {
        "interfaces": [{"name": "net1", "sandbox": "/x"}],
        "ips": [{"address": "10.0.0.2/24"}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1"}],
    }
    (entry,) = netstatus.statuses(result, "ns/n", False, {"type": "pci"})
    assert list(entry) == ["name", "interface", "ips", "dns", "device-info", "gateway"]


def test_a_checkpoint_that_is_not_one_is_an_error_for_the_lookup_and_nothing_for_the_gate() -> None:
    with pytest.raises(ValueError):
        kubeletcheckpoint.resource_map(b'{"Data": {"PodDeviceEntries": 3}}', "u")
    assert kubeletcheckpoint.allocated(b'{"Data": {"PodDeviceEntries": 3}}', "u", "r") == frozenset()
    assert kubeletcheckpoint.resource_map(b'{"Data": {}}', "u") == {}
