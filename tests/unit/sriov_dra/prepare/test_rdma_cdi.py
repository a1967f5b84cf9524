"""RDMA in the claim's CDI spec: each VF's own verbs node, rdma_cm and upstream's variables; a VF
without RDMA or bound to vfio-pci prepares as before; unprepare takes them away."""

from pathlib import Path
from typing import Any

from sriov_dra.state.cdi import CdiDir, rehome
from tests.fakes.sysfs import add_rdma
from tests.unit.sriov_dra.prepare.test_plain import VF_CONFIG, Env, _vfio_config, claim


def _edits(env: Env, claim_uid: str) -> dict[str, Any]:
    return {d["name"]: d["containerEdits"] for d in env.spec(claim_uid)["devices"]}


def test_each_vf_gets_its_own_uverbs_node_rdma_cm_and_variables(tmp_path: Path) -> None:
    env = Env(tmp_path)
    add_rdma(env.sysfs, "0000:17:00.1", "mlx5_1", "uverbs1")
    add_rdma(env.sysfs, "0000:17:00.2", "mlx5_2", "uverbs2")
    devices = [("vf", "0000-17-00-1"), ("vf", "0000-17-00-2"), ("vf", "0000-17-00-3")]
    ref = env.claims.add(claim("c", "uid-c", "pod-1", devices, [VF_CONFIG]))
    assert env.preparer.prepare([ref])["uid-c"].error == ""
    edits = _edits(env, "uid-c")
    first = edits["uid-c-0000-17-00-1"]
    assert first["deviceNodes"] == [
        {"path": "/dev/infiniband/uverbs1", "hostPath": "/dev/infiniband/uverbs1", "type": "c"},
        {"path": "/dev/infiniband/rdma_cm", "hostPath": "/dev/infiniband/rdma_cm", "type": "c"},
    ]
    assert {
        "SRIOVNETWORK_0000_17_00_1_RDMA_DEVICE=mlx5_1",
        "SRIOVNETWORK_0000_17_00_1_RDMA_UVERB=/dev/infiniband/uverbs1",
        "SRIOVNETWORK_0000_17_00_1_RDMA_CM=/dev/infiniband/rdma_cm",
    } <= set(first["env"])
    assert edits["uid-c-0000-17-00-2"]["deviceNodes"][0]["path"] == "/dev/infiniband/uverbs2"
    # The third VF has no RDMA device: no node, no RDMA variable, no error.
    third = edits["uid-c-0000-17-00-3"]
    assert "deviceNodes" not in third and not any("_RDMA_" in e for e in third["env"])
    assert env.spec("uid-c")["cdiVersion"] == "0.5.0"
    assert env.preparer.unprepare([ref]) == {"uid-c": ""}
    assert not env.cdi.exists("uid-c")


def test_vfio_bound_rdma_vf_is_not_an_error_and_gets_no_rdma(tmp_path: Path) -> None:
    env = Env(tmp_path)
    add_rdma(env.sysfs, "0000:17:00.1", "mlx5_1", "uverbs1")
    # What binding to vfio-pci does to the VF: the kernel drops its RDMA device with its netdev.
    vf = env.sysfs / "bus/pci/devices/0000:17:00.1"
    (vf / "infiniband/mlx5_1").rmdir()
    (vf / "driver").unlink()
    (env.sysfs / "bus/pci/drivers/vfio-pci").mkdir(parents=True)
    (vf / "driver").symlink_to("../../../../bus/pci/drivers/vfio-pci")
    (vf / "iommu_group").symlink_to("../../../../kernel/iommu_groups/7")
    ref = env.claims.add(claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")], [_vfio_config()]))
    assert env.preparer.prepare([ref])["ua"].error == ""
    (edits,) = _edits(env, "ua").values()
    assert [n["path"] for n in edits["deviceNodes"]] == ["/dev/vfio/7", "/dev/vfio/vfio"]
    assert not any("_RDMA_" in e for e in edits["env"])


def test_the_device_root_moves_host_paths_only(tmp_path: Path) -> None:
    spec: dict[str, Any] = {
        "devices": [
            {
                "name": "d",
                "containerEdits": {
                    "deviceNodes": [
                        {"path": "/dev/infiniband/uverbs1", "hostPath": "/dev/infiniband/uverbs1"}
                    ]
                },
            },
            {"name": "p", "containerEdits": {"env": ["A=1"]}},
        ]
    }
    moved = rehome(spec, tmp_path / "dev")
    node = moved["devices"][0]["containerEdits"]["deviceNodes"][0]
    assert node == {"path": "/dev/infiniband/uverbs1", "hostPath": str(tmp_path / "dev/infiniband/uverbs1")}
    assert spec["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"] == "/dev/infiniband/uverbs1"
    cdi = CdiDir(tmp_path / "cdi", dev_root=tmp_path / "dev")
    cdi.root.mkdir()
    cdi.write("u", spec)
    assert str(tmp_path / "dev/infiniband/uverbs1") in cdi.path("u").read_text()
