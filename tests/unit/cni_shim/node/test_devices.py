"""The sysfs and checkpoint adapter behind cni_shim.ports.NodeDevices, on a kernel-shaped tree."""

from __future__ import annotations

import json
import os

from cni_shim.core.deviceaccess import HWADDR, KERNELPATH, NETDEV, PCI
from cni_shim.node.devices import SysfsDevices
from tests.fakes.sysfs import add_pf

PF = "0000:3b:00.0"


def _node(tmp_path):
    vfs = add_pf(tmp_path, PF, "ens1", 2)
    # class/net/<netdev>/device as the kernel links it, and the netdev's MAC.
    for i, vf in enumerate(vfs):
        net = tmp_path / "class" / "net" / f"ens1v{i}"
        net.mkdir(parents=True)
        os.symlink(f"../../../devices/pci0000:16/0000:16:01.0/{vf}", net / "device")
        (net / "address").write_text(f"02:00:00:00:00:0{i}\n")
    return SysfsDevices(str(tmp_path), str(tmp_path / "checkpoint")), vfs


def test_a_vf_is_a_function_with_physfn_however_it_is_named(tmp_path):
    devices, vfs = _node(tmp_path)
    assert devices.virtual_function(PCI, vfs[0]) == vfs[0]
    assert devices.virtual_function(PCI, f"{PF}/virtfn1") == vfs[1]  # Go's filepath.Join would follow it
    assert devices.virtual_function(PCI, f"{PF}/virtfn1/../virtfn1") == vfs[1]
    assert devices.virtual_function(NETDEV, "ens1v1") == vfs[1]
    assert devices.virtual_function(HWADDR, "02:00:00:00:00:00") == vfs[0]
    assert devices.virtual_function(KERNELPATH, f"/sys/devices/pci0000:16/0000:16:01.0/{vfs[0]}") == vfs[0]


def test_a_pf_an_unknown_name_or_a_plain_netdev_is_no_vf(tmp_path):
    devices, _ = _node(tmp_path)
    assert devices.virtual_function(PCI, PF) is None
    assert devices.virtual_function(PCI, "0000:99:00.1") is None
    assert devices.virtual_function(PCI, "bad\0name") is None
    assert devices.virtual_function(NETDEV, "ens1") is None
    assert devices.virtual_function(HWADDR, "02:ff:ff:ff:ff:ff") is None
    assert devices.virtual_function("other", "x") is None
    assert SysfsDevices(str(tmp_path / "none"), "").virtual_function(HWADDR, "02:00:00:00:00:00") is None


def test_the_allocation_comes_from_the_checkpoint_file_and_none_without_it(tmp_path):
    devices, vfs = _node(tmp_path)
    assert devices.allocated("u1", "vendor.com/vf") == frozenset()
    entry = {
        "PodUID": "u1",
        "ContainerName": "c",
        "ResourceName": "vendor.com/vf",
        "DeviceIDs": {"0": [vfs[0]]},
    }
    (tmp_path / "checkpoint").write_text(json.dumps({"Data": {"PodDeviceEntries": [entry]}, "Checksum": 0}))
    assert devices.allocated("u1", "vendor.com/vf") == {vfs[0]}
