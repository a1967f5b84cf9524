"""A managed claim on an RDMA VF: prepare freezes the device info in the record and the shadow and
hands the verbs node to the container; a rebuild after a lost checkpoint gives back the same."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from sriov_contract.keys import DEVICE_INFO_ANNOTATION
from sriov_dra.core.hostdevice import rdma_edits
from sriov_dra.core.rebuild import Rebuild, rebuild
from sriov_dra.model import RdmaDevice
from sriov_dra.sysfs.discovery import discover
from tests.fakes.driver_env import NODE, NODE_UID, Env, vf_config
from tests.fakes.sysfs import add_rdma
from tests.unit.sriov_dra.core.test_rebuild import as_pending

VF1 = "0000-17-00-1"


def test_an_rdma_vf_is_prepared_frozen_and_rebuilt_alike(env: Env, tmp_path: Path) -> None:
    add_rdma(tmp_path / "sys", "0000:17:00.1", "mlx5_1", "uverbs1")
    env.inventory.update(discover(tmp_path / "sys"))
    pod = env.pod(name="pod-a", claims=[{"name": "vfs", "resourceClaimName": "a"}])
    ref = env.claim("a", pod, [VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (record,) = env.checkpoint.snapshot_all()
    (device,) = record.devices
    assert device.device_nodes == ("/dev/infiniband/uverbs1", "/dev/infiniband/rdma_cm")
    assert device.env["SRIOVNETWORK_0000_17_00_1_RDMA_DEVICE"] == "mlx5_1"
    assert (device.managed_binding or {})["rdmaDevice"] == "mlx5_1"
    (shadow,) = env.shadows()
    assert json.loads(shadow["metadata"]["annotations"][DEVICE_INFO_ANNOTATION]) == {
        "version": 1,
        "pciAddress": "0000:17:00.1",
        "pfPciAddress": "0000:17:00.0",
        "rdmaDevice": "mlx5_1",
    }
    got = rebuild(
        env.shadows(),
        {},
        {c["metadata"]["uid"]: c for (kind, _n, _m), c in env.api.objects.items() if kind == "claims"},
        {p["metadata"]["uid"]: p for (kind, _n, _m), p in env.api.objects.items() if kind == "pods"},
        node_name=NODE,
        node_uid=NODE_UID,
        pci_of={name: vf.pci_address for name, vf in env.inventory.items()},
        rdma_of={name: vf.rdma for name, vf in env.inventory.items() if vf.rdma is not None},
    )
    assert got.not_rebuilt == ()
    assert list(got.records) == [as_pending(record)]


def _rebuilt(env: Env, shadows: list[dict[str, object]]) -> Rebuild:
    return rebuild(
        shadows,
        {},
        {c["metadata"]["uid"]: c for (kind, _n, _m), c in env.api.objects.items() if kind == "claims"},
        {p["metadata"]["uid"]: p for (kind, _n, _m), p in env.api.objects.items() if kind == "pods"},
        node_name=NODE,
        node_uid=NODE_UID,
        pci_of={name: vf.pci_address for name, vf in env.inventory.items()},
    )


def test_a_shadow_from_before_device_info_rebuilds_without_it_and_a_bad_one_is_refused(env: Env) -> None:
    pod = env.pod(name="pod-a", claims=[{"name": "vfs", "resourceClaimName": "a"}])
    ref = env.claim("a", pod, [VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    older = copy.deepcopy(shadow)
    del older["metadata"]["annotations"][DEVICE_INFO_ANNOTATION]
    (record,) = _rebuilt(env, [older]).records
    assert "pfPciAddress" not in (record.devices[0].managed_binding or {})
    broken = copy.deepcopy(shadow)
    broken["metadata"]["annotations"][DEVICE_INFO_ANNOTATION] = '{"version":2}'
    got = _rebuilt(env, [broken])
    assert got.records == () and "unreadable device info" in got.not_rebuilt[0].why


def test_the_rdma_edits_without_verbs_or_rdma_cm() -> None:
    env: dict[str, str] = {}
    assert rdma_edits("X", RdmaDevice("mlx5_0"), env) == []
    assert env == {"SRIOVNETWORK_X_RDMA_DEVICE": "mlx5_0"}
    env.clear()
    assert rdma_edits("X", RdmaDevice("mlx5_0", rdma_cm=True), env) == ["/dev/infiniband/rdma_cm"]
    assert env["SRIOVNETWORK_X_RDMA_CM"] == "/dev/infiniband/rdma_cm" and len(env) == 2
