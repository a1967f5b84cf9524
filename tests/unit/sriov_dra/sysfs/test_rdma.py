"""A VF's RDMA device and verbs node from sysfs; none is an answer, never an error."""

from pathlib import Path

from sriov_dra.model import RdmaDevice
from sriov_dra.sysfs.discovery import discover
from sriov_dra.sysfs.rdma import rdma_device
from tests.fakes.sysfs import add_pf, add_rdma


def test_rdma_device_names_its_own_verbs_node(tmp_path: Path) -> None:
    vf1, vf2 = add_pf(tmp_path, "0000:17:00.0", "ens1f0", 2)
    add_rdma(tmp_path, vf1, "mlx5_3", "uverbs3")
    add_rdma(tmp_path, vf2, "mlx5_4", "uverbs4")
    assert rdma_device(tmp_path, vf1) == RdmaDevice("mlx5_3", "uverbs3", rdma_cm=True)
    assert rdma_device(tmp_path, vf2) == RdmaDevice("mlx5_4", "uverbs4", rdma_cm=True)


def test_no_rdma_vfio_and_ambiguous_give_none(tmp_path: Path) -> None:
    plain, two = add_pf(tmp_path, "0000:17:00.0", "ens1f0", 2)
    (vfio,) = add_pf(tmp_path, "0000:31:00.0", "ens2f0", 1, vf_driver="vfio-pci", port="0000:16:02.0")
    add_rdma(tmp_path, two, "mlx5_1", "uverbs1")
    add_rdma(tmp_path, two, "mlx5_2", "uverbs2")
    assert rdma_device(tmp_path, plain) is None
    assert rdma_device(tmp_path, vfio) is None  # vfio-pci: the kernel removed its RDMA device
    assert rdma_device(tmp_path, two) is None


def test_without_verbs_module_or_rdma_cm(tmp_path: Path) -> None:
    (vf,) = add_pf(tmp_path, "0000:17:00.0", "ens1f0", 1)
    add_rdma(tmp_path, vf, "mlx5_0", None, rdma_cm=False)
    assert rdma_device(tmp_path, vf) == RdmaDevice("mlx5_0", None, rdma_cm=False)


def test_inventory_keeps_the_rdma_device(tmp_path: Path) -> None:
    _, vf2 = add_pf(tmp_path, "0000:17:00.0", "ens1f0", 2)
    add_rdma(tmp_path, vf2, "mlx5_7", "uverbs7")
    inv = discover(tmp_path)
    assert inv["0000-17-00-1"].rdma is None
    assert inv["0000-17-00-2"].rdma == RdmaDevice("mlx5_7", "uverbs7", rdma_cm=True)
