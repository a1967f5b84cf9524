import os

import pytest

from sriov_contract.errors import ReasonedError
from testbed.fakenode import load_two_rail
from testbed.fakesysfs import FakeSysfs, remove_tree
from testbed.sriov_topology import parse_topology, plan_node, vf_bdf


@pytest.fixture
def plan():
    return plan_node(parse_topology(load_two_rail()), "fab1")


def test_two_rail_plan_mirrors_spec_names_and_roots(plan):
    assert [(pf.netdev, pf.rail, pf.subnet, pf.pcie_root) for pf in plan.pfs] == [
        ("fab1ens1f0", "rail-a", "192.0.2.0/24", "pci0000:16"),
        ("fab1ens2f0", "rail-b", "198.51.100.0/24", "pci0000:85"),
    ]
    assert [(g.vendor, g.pcie_root) for g in plan.gpus] == [("10de", "pci0000:16"), ("10de", "pci0000:85")]
    vf = plan.vfs[0]
    assert (vf.pci, vf.netdev, vf.vf_index, vf.pf, vf.numa) == (
        "0000:17:00.2",
        "fab1ens1f0v0",
        0,
        "fab1ens1f0",
        0,
    )
    assert len({v.mac for v in plan.vfs}) == len(plan.vfs) == 8
    assert all(int(v.mac.split(":")[0], 16) & 0b11 == 0b10 for v in plan.vfs)  # local, unicast


def test_plan_is_deterministic_per_prefix(plan):
    topo = parse_topology(load_two_rail())
    assert plan_node(topo, "fab1") == plan
    assert plan_node(topo, "fab2").vfs[0].mac != plan.vfs[0].mac


def test_vf_addresses_roll_over_device_numbers():
    assert vf_bdf("0000:17:00.0", 7) == "0000:17:00.7"
    assert vf_bdf("0000:17:00.0", 8) == "0000:17:01.0"


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({}, "non-empty 'roots'"),
        ({"roots": [{"root": "zz"}]}, "must look like 0000:16"),
        ({"roots": [{"root": "0000:16", "pfs": [{"name": "a", "bdf": "17:00.0"}]}]}, "DDDD:BB:dd.f"),
        (
            {
                "roots": [
                    {
                        "root": "0000:16",
                        "pfs": [{"name": "a", "bdf": "0000:17:00.0", "vfs": 9, "totalVfs": 8}],
                    }
                ]
            },
            "totalVfs",
        ),
        ({"roots": [{"root": "0000:16", "pfs": [{"bdf": "0000:17:00.0"}]}]}, "needs 'name'"),
        (
            {
                "roots": [
                    {
                        "root": "0000:16",
                        "pfs": [{"name": "a", "bdf": "0000:17:00.0"}],
                        "gpus": [{"bdf": "0000:17:00.0"}],
                    }
                ]
            },
            "appears twice",
        ),
        (
            {"roots": [{"root": "0000:16", "pfs": [{"name": "averylongpf", "bdf": "0000:17:00.0"}]}]},
            "exceed 15 bytes",
        ),
    ],
)
def test_invalid_topologies_are_refused_with_reason(doc, needle):
    with pytest.raises(ReasonedError, match=needle) as info:
        plan_node(parse_topology(doc), "fab1")
    assert info.value.reason == "InvalidTopology"


def test_sysfs_tree_has_upstream_layout(tmp_path, plan):
    sysfs = FakeSysfs(tmp_path, plan)
    sysfs.create()
    dev = tmp_path / "bus/pci/devices"
    vf = plan.vfs[1]
    # PCIe root is the first path element after devices/, as upstream derives it.
    resolved = (dev / vf.pci).resolve().relative_to(tmp_path)
    assert resolved.parts[:2] == ("devices", "pci0000:16")
    assert os.listdir(dev / vf.pci / "physfn/net") == [vf.pf]
    pf_dev = tmp_path / "class/net" / vf.pf / "device"
    assert (pf_dev / "sriov_numvfs").read_text() == "4\n"
    assert (pf_dev / "sriov_totalvfs").read_text() == "8\n"
    assert os.path.basename(os.readlink(pf_dev / f"virtfn{vf.vf_index}")) == vf.pci
    assert os.listdir(dev / vf.pci / "net") == [vf.netdev]
    assert (dev / vf.pci / "vendor").read_text() == "0x15b3\n"
    assert (dev / vf.pci / "device").read_text() == "0x1018\n"
    assert (dev / vf.pci / "numa_node").read_text() == "0\n"
    assert (dev / vf.pci / "class").read_text() == "0x020000\n"
    assert sysfs.driver_of(vf.pci) == "mlx5_core"
    assert (tmp_path / "bus/pci/drivers/mlx5_core" / vf.pci).resolve() == (dev / vf.pci).resolve()
    gpu = plan.gpus[1]
    assert (dev / gpu.pci / "class").read_text() == "0x030200\n"
    assert (dev / gpu.pci).resolve().relative_to(tmp_path).parts[1] == "pci0000:85"


def test_binding_to_vfio_hides_the_netdev_and_rebinding_restores_it(tmp_path, plan):
    sysfs = FakeSysfs(tmp_path, plan)
    sysfs.create()
    vf = plan.vfs[0]
    dev = tmp_path / "bus/pci/devices" / vf.pci
    sysfs.bind(vf.pci, "vfio-pci", vf.netdev)
    assert sysfs.driver_of(vf.pci) == "vfio-pci"
    assert not (dev / "net" / vf.netdev).exists()
    assert not (tmp_path / "class/net" / vf.netdev).exists()
    assert not (tmp_path / "bus/pci/drivers/mlx5_core" / vf.pci).exists()
    sysfs.bind(vf.pci, None, vf.netdev)
    assert sysfs.driver_of(vf.pci) is None
    sysfs.bind(vf.pci, "mlx5_core", vf.netdev)
    assert os.listdir(dev / "net") == [vf.netdev]


def test_remove_tree_leaves_an_empty_root(tmp_path, plan):
    FakeSysfs(tmp_path, plan).create()
    remove_tree(tmp_path)
    assert list(tmp_path.iterdir()) == []


def _rdma_rail_a():
    doc = load_two_rail()
    doc["roots"][0]["pfs"][0]["rdma"] = True
    return plan_node(parse_topology(doc), "fab1")


def test_rdma_pf_gives_its_vfs_rdma_devices_the_discovery_reads(tmp_path):
    from sriov_dra.model import RdmaDevice  # noqa: PLC0415
    from sriov_dra.sysfs.discovery import discover  # noqa: PLC0415

    plan = _rdma_rail_a()
    assert [(v.rdma_device, v.uverbs) for v in plan.vfs[:2]] == [("mlx5_0", "uverbs0"), ("mlx5_1", "uverbs1")]
    assert all(v.rdma_device == "" for v in plan.vfs if v.rail == "rail-b")
    FakeSysfs(tmp_path, plan).create()
    inventory = {vf.pci_address: vf.rdma for vf in discover(tmp_path).values()}
    assert inventory[plan.vfs[1].pci] == RdmaDevice("mlx5_1", "uverbs1", rdma_cm=True)
    assert inventory[plan.vfs[4].pci] is None
    for name in ("uverbs0", "uverbs3", "rdma_cm"):
        node = tmp_path / "dev/infiniband" / name
        assert node.exists()
        if os.geteuid() == 0:
            assert os.major(node.stat().st_rdev) == 1 and os.minor(node.stat().st_rdev) == 3


def test_binding_an_rdma_vf_to_vfio_hides_its_rdma_device(tmp_path):
    from sriov_dra.sysfs.rdma import rdma_device  # noqa: PLC0415

    plan = _rdma_rail_a()
    sysfs = FakeSysfs(tmp_path, plan)
    sysfs.create()
    vf = plan.vfs[0]
    sysfs.bind(vf.pci, "vfio-pci", vf.netdev, vf.rdma_device)
    assert rdma_device(tmp_path, vf.pci) is None
    sysfs.bind(vf.pci, "mlx5_core", vf.netdev, vf.rdma_device)
    rdma = rdma_device(tmp_path, vf.pci)
    assert rdma is not None and rdma.uverbs == "uverbs0"
    remove_tree(tmp_path)
    assert list(tmp_path.iterdir()) == []
