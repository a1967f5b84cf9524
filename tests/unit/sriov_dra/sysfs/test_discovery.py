"""Discovery from a sysfs root: PFs, VFs, upstream attribute names, no empty pcieRoot."""

from pathlib import Path

import pytest

from sriov_contract.errors import ReasonedError
from sriov_dra import model
from sriov_dra.sysfs import discovery as d
from tests.fakes.sysfs import add_pf


def test_discovers_vfs_with_upstream_attributes(tmp_path: Path) -> None:
    add_pf(tmp_path, "0000:17:00.0", "ens1f0", 2)
    inv = d.discover(tmp_path)
    assert sorted(inv) == ["0000-17-00-1", "0000-17-00-2"]
    vf = inv["0000-17-00-2"]
    assert vf.pci_address == "0000:17:00.2" and vf.vf_id == 1 and vf.pf_name == "ens1f0"
    assert vf.attributes == {
        model.ATTR_VENDOR: "15b3",
        model.ATTR_DEVICE_ID: "1018",
        model.ATTR_PF_DEVICE_ID: "1017",
        model.ATTR_PCI_ADDRESS: "0000:17:00.2",
        model.ATTR_MULTUS_DEVICE_ID: "0000:17:00.2",
        model.ATTR_PF_NAME: "ens1f0",
        model.ATTR_ESWITCH_MODE: "legacy",
        model.ATTR_VF_ID: 1,
        model.ATTR_PCIE_ROOT: "pci0000:16",
        model.ATTR_PF_PCI_ADDRESS: "0000:17:00.0",
        model.ATTR_PCI_BUS_ID: "0000:17:00.2",
        model.ATTR_LINK_TYPE: "ethernet",
        model.ATTR_RDMA_CAPABLE: False,
        model.ATTR_NUMA_NODE: 0,
    }
    assert set(vf.attributes) == model.RESERVED_ATTRIBUTES


def test_unknown_pcie_root_is_omitted_never_empty(tmp_path: Path) -> None:
    # a PF that does not hang off a pciDDDD:BB root complex (e.g. a platform bus)
    add_pf(tmp_path, "0000:17:00.0", "ens1f0", 1, pcie_root="platform")
    vf = d.discover(tmp_path)["0000-17-00-1"]
    assert model.ATTR_PCIE_ROOT not in vf.attributes
    assert all(v != "" for v in vf.attributes.values())


def test_skips_non_network_pf_without_netdev_and_vfs_themselves(tmp_path: Path) -> None:
    add_pf(tmp_path, "0000:17:00.0", "ens1f0", 1)
    add_pf(tmp_path, "0000:31:00.0", "gpu0", 1, cls="0x030200", pcie_root="pci0000:30", port="0000:30:01.0")
    add_pf(tmp_path, "0000:41:00.0", "nonet", 1, pcie_root="pci0000:40", port="0000:40:01.0")
    (tmp_path / "devices/pci0000:40/0000:40:01.0/0000:41:00.0/net/nonet").rmdir()
    assert sorted(d.discover(tmp_path)) == ["0000-17-00-1"]


def test_numa_link_type_and_rdma(tmp_path: Path) -> None:
    add_pf(tmp_path, "0000:17:00.0", "ib0", 1, numa="-1", link_type="32")
    (tmp_path / "devices/pci0000:16/0000:16:01.0/0000:17:00.1/infiniband/mlx5_3").mkdir(parents=True)
    attrs = d.discover(tmp_path)["0000-17-00-1"].attributes
    assert attrs[model.ATTR_NUMA_NODE] == -1
    assert attrs[model.ATTR_LINK_TYPE] == "infiniband"
    assert attrs[model.ATTR_RDMA_CAPABLE] is True


def test_unreadable_sysfs_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ReasonedError) as err:
        d.discover(tmp_path / "missing")
    assert err.value.reason == "SysfsUnreadable"


def test_device_name_is_a_dns_label() -> None:
    assert model.device_name("0000:08:00.2") == "0000-08-00-2"
