"""The reporter's sysfs reading against the bed's fake sysfs tree (the layout the kernel uses)."""

from pathlib import Path

import pytest

from sriov_operator.node.sysfs import read_pfs
from sriov_operator.reasons import NODE_INVENTORY_UNREADABLE, OperatorError
from testbed.fakenode import load_two_rail
from testbed.fakesysfs import FakeSysfs
from testbed.sriov_topology import parse_topology, plan_node


def test_reads_every_sriov_pf_with_its_vfs_and_skips_other_devices(tmp_path: Path) -> None:
    plan = plan_node(parse_topology(load_two_rail()), "u1")
    sysfs = FakeSysfs(tmp_path, plan)
    sysfs.create()
    # a VF bound to vfio-pci loses its netdev; the reading says so instead of guessing a name
    moved = plan.pfs[0].vfs[0]
    sysfs.bind(moved.pci, "vfio-pci", moved.netdev)
    pfs = {p.pci: p for p in read_pfs(tmp_path)}
    assert set(pfs) == {pf.pci for pf in plan.pfs}  # no GPU, no bridge, no VF reported as a PF
    for want in plan.pfs:
        got = pfs[want.pci]
        assert (got.name, got.vendor, got.device_id, got.link_type) == (
            want.netdev,
            want.vendor,
            want.device,
            "ETH",
        )
        assert (got.num_vfs, got.total_vfs) == (len(want.vfs), want.total_vfs)
        assert sorted((v.pci, v.vf_id, v.device_id) for v in got.vfs) == [
            (v.pci, v.vf_index, v.device) for v in want.vfs
        ]
    by_pci = {v.pci: v for p in pfs.values() for v in p.vfs}
    assert (by_pci[moved.pci].driver, by_pci[moved.pci].netdev) == ("vfio-pci", "")
    other = plan.pfs[0].vfs[1]
    assert (by_pci[other.pci].driver, by_pci[other.pci].netdev) == (other.driver, other.netdev)


def test_a_missing_sysfs_is_a_typed_error_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(OperatorError) as err:
        read_pfs(tmp_path / "nothing")
    assert err.value.reason == NODE_INVENTORY_UNREADABLE
    assert "--sysfs-root" in err.value.message
