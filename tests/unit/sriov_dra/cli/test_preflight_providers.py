"""`sriov-dra preflight --node`: one provider per VF on a node carrying both the device-plugin
resourceName path and DRA (spec 18.1)."""

from __future__ import annotations

import json
from pathlib import Path

from sriov_dra.cli.preflight import check_one_provider, device_plugin_vfs, published_vfs
from sriov_dra.model import ATTR_PCI_ADDRESS


def _devinfo(d: Path, resource: str, pci: str) -> None:
    d.mkdir(exist_ok=True)
    doc = {"type": "pci", "version": "1.1.0", "pci": {"pci-address": pci}}
    (d / f"{resource}-{pci}-device.json").write_text(json.dumps(doc))


def _slice(*pcis: str) -> dict[str, object]:
    return {
        "spec": {
            "devices": [
                {"name": f"vf{i}", "attributes": {ATTR_PCI_ADDRESS: {"string": p}}}
                for i, p in enumerate(pcis)
            ]
        }
    }


def test_disjoint_inventories_pass(tmp_path):
    _devinfo(tmp_path / "dp", "openshift.io-legacy_vfs", "0000:03:00.5")
    (tmp_path / "dp" / "garbage-device.json").write_text("{")
    check = check_one_provider(device_plugin_vfs(tmp_path / "dp"), published_vfs([_slice("0000:03:00.1")]))
    assert check.ok, check.detail
    assert check.detail == "1 device-plugin VF(s), none published by the driver"


def test_a_vf_both_providers_hand_out_fails_and_is_named(tmp_path):
    _devinfo(tmp_path / "dp", "openshift.io-legacy_vfs", "0000:03:00.5")
    check = check_one_provider(
        device_plugin_vfs(tmp_path / "dp"), published_vfs([_slice("0000:03:00.1", "0000:03:00.5")])
    )
    assert not check.ok
    assert "0000:03:00.5 (openshift.io-legacy_vfs-0000:03:00.5-device.json)" in check.detail


def test_no_device_plugin_directory_means_no_legacy_vfs(tmp_path):
    assert device_plugin_vfs(tmp_path / "absent") == {}
