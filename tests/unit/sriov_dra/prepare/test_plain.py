"""Plain-mode prepare/unprepare (PlainPreparer over HostDevices) on a sysfs tree, CDI dir and file
checkpoint (no API server)."""

import json
from pathlib import Path
from typing import Any

from sriov_contract.errors import ReasonedError
from sriov_dra.kubeletplugin.api import ClaimRef
from sriov_dra.model import DRIVER_NAME
from sriov_dra.prepare.host import HostDevices
from sriov_dra.prepare.plain import PlainPreparer
from sriov_dra.state.cdi import CdiDir
from sriov_dra.state.checkpoint import FileStorage, PreparedClaims
from sriov_dra.sysfs.discovery import discover
from sriov_dra.sysfs.vfdriver import SysfsVfDriver
from tests.fakes.sysfs import add_pf
from tests.support.checkpoint import prepared_claim

NODE = "node-a"
KIND = "sriovnetwork.k8snetworkplumbingwg.io/vf"


def claim(name, uid, pod_uid, devices, configs=(), extra_results=()):
    results = [{"request": req, "driver": DRIVER_NAME, "pool": NODE, "device": dev} for req, dev in devices]
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": uid},
        "status": {
            "allocation": {"devices": {"results": results + list(extra_results), "config": list(configs)}},
            "reservedFor": [{"resource": "pods", "name": "pod-" + pod_uid, "uid": pod_uid}],
        },
    }


class Claims:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, obj: dict[str, Any]) -> ClaimRef:
        md = obj["metadata"]
        self.objects[(md["namespace"], md["name"])] = obj
        return ClaimRef(md["namespace"], md["name"], md["uid"])

    def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self.objects[(namespace, name)]
        except KeyError:
            raise ReasonedError("ClaimNotFound", f"claim {namespace}/{name} not found") from None


class Env:
    def __init__(self, tmp_path: Path, vf_driver=None) -> None:
        self.sysfs = tmp_path / "sys"
        add_pf(self.sysfs, "0000:17:00.0", "ens1f0", 3)
        self.inventory = discover(self.sysfs)
        self.cdi = CdiDir(tmp_path / "cdi")
        self.cdi.root.mkdir()
        self.ckpt_path = tmp_path / "checkpoint.json"
        self.claims = Claims()
        self.vf_driver = vf_driver or SysfsVfDriver(self.sysfs)
        self.preparer = self.new_preparer()

    def new_preparer(self, storage=None) -> PlainPreparer:
        self.checkpoint = PreparedClaims(storage or FileStorage(self.ckpt_path))
        devices = HostDevices(
            node_name=NODE,
            inventory=self.inventory.get,
            checkpoint=self.checkpoint,
            cdi_specs=self.cdi,
            vf_driver=self.vf_driver,
        )
        return PlainPreparer(claims=self.claims, devices=devices, checkpoint=self.checkpoint)

    def spec(self, uid: str) -> Any:
        return json.loads(self.cdi.path(uid).read_text())


VF_CONFIG = {
    "source": "FromClaim",
    "requests": ["vf"],
    "opaque": {
        "driver": DRIVER_NAME,
        "parameters": {
            "apiVersion": f"{DRIVER_NAME}/v1alpha1",
            "kind": "VfConfig",
            "ifName": "net1",
            "netAttachDefName": "rail0",
        },
    },
}


def test_prepare_unprepare_round_trip(tmp_path: Path) -> None:
    env = Env(tmp_path)
    gpu = {"request": "gpu", "driver": "gpu.example.com", "pool": NODE, "device": "gpu-0"}
    ref = env.claims.add(claim("c", "uid-c", "pod-1", [("vf/sub", "0000-17-00-1")], [VF_CONFIG], [gpu]))
    out = env.preparer.prepare([ref])["uid-c"]
    assert out.error == ""
    (dev,) = out.devices  # the GPU result belongs to another driver and is ignored
    assert dev.request_names == ("vf",) and dev.pool == NODE and dev.device == "0000-17-00-1"
    assert dev.cdi_device_ids == (f"{KIND}=uid-c-0000-17-00-1", f"{KIND}=pod-1")
    claim_spec = env.spec("uid-c")
    assert claim_spec["kind"] == KIND
    (cdev,) = claim_spec["devices"]
    assert cdev["name"] == "uid-c-0000-17-00-1"
    assert set(cdev["containerEdits"]["env"]) == {
        "SRIOVNETWORK_VF_DEVICE_0000_17_00_1=0000:17:00.1",
        "SRIOVNETWORK_NET_ATTACH_DEF_NAME=rail0",
    }
    assert env.spec("pod-1")["devices"] == [
        {"name": "pod-1", "containerEdits": {"env": ["SRIOVNETWORK_PCI_ADDRESSES=0000:17:00.1"]}}
    ]
    record = prepared_claim(PreparedClaims(FileStorage(env.ckpt_path)), "uid-c")
    assert record.pod_uid == "pod-1"
    assert record.devices[0].config == {"ifName": "net1", "netAttachDefName": "rail0"}

    assert env.preparer.unprepare([ref]) == {"uid-c": ""}
    assert not env.cdi.exists("uid-c") and not env.cdi.exists("pod-1")
    assert PreparedClaims(FileStorage(env.ckpt_path)).snapshot_all() == []
    # idempotent: a second unprepare (kubelet retry) succeeds
    assert env.preparer.unprepare([ref]) == {"uid-c": ""}


def test_one_bad_claim_never_fails_its_siblings(tmp_path: Path) -> None:
    env = Env(tmp_path)
    good1 = env.claims.add(claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")]))
    bad = env.claims.add(claim("b", "ub", "pod-1", [("vf", "0000-99-00-1")]))
    good2 = env.claims.add(claim("c", "uc", "pod-1", [("vf", "0000-17-00-2")]))
    out = env.preparer.prepare([good1, bad, good2])
    assert out["ua"].error == "" and out["uc"].error == ""
    assert out["ub"].error.startswith("UnknownDevice:") and "0000-99-00-1" in out["ub"].error
    assert not env.cdi.exists("ub")
    assert env.spec("pod-1")["devices"][0]["containerEdits"]["env"] == [
        "SRIOVNETWORK_PCI_ADDRESSES=0000:17:00.1,0000:17:00.2"
    ]


def test_pod_global_cdi_stays_while_another_claim_needs_it(tmp_path: Path) -> None:
    env = Env(tmp_path)
    a = env.claims.add(claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")]))
    b = env.claims.add(claim("b", "ub", "pod-1", [("vf", "0000-17-00-2")]))
    env.preparer.prepare([a])
    env.preparer.prepare([b])
    env.preparer.unprepare([a])
    assert env.spec("pod-1")["devices"][0]["containerEdits"]["env"] == [
        "SRIOVNETWORK_PCI_ADDRESSES=0000:17:00.2"
    ]
    env.preparer.unprepare([b])
    assert not env.cdi.exists("pod-1")


def test_already_prepared_fast_path_rewrites_missing_cdi_after_restart(tmp_path: Path) -> None:
    env = Env(tmp_path)
    ref = env.claims.add(claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")]))
    first = env.preparer.prepare([ref])["ua"]
    before = env.cdi.path("ua").read_bytes()
    env.cdi.remove("ua")
    env.cdi.remove("pod-1")  # tmpfs CDI dir emptied by a reboot; checkpoint survives
    restarted = env.new_preparer()
    again = restarted.prepare([ref])["ua"]
    assert again == first
    assert env.cdi.path("ua").read_bytes() == before and env.cdi.exists("pod-1")


def test_claim_replaced_and_unallocated_and_shared_are_refused(tmp_path: Path) -> None:
    env = Env(tmp_path)
    obj = claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")])
    env.claims.add(obj)
    out = env.preparer.prepare([ClaimRef("ns", "a", "old-uid")])
    assert out["old-uid"].error.startswith("ClaimReplaced:")
    obj["status"]["reservedFor"].append({"resource": "pods", "name": "p2", "uid": "pod-2"})
    assert env.preparer.prepare([ClaimRef("ns", "a", "ua")])["ua"].error.startswith("UnsupportedConsumer:")
    del obj["status"]["allocation"]
    assert env.preparer.prepare([ClaimRef("ns", "a", "ua")])["ua"].error.startswith("ClaimNotAllocated:")
    missing = env.preparer.prepare([ClaimRef("ns", "gone", "ug")])
    assert missing["ug"].error.startswith("ClaimNotFound:")


def test_invalid_vf_config_fails_that_claim(tmp_path: Path) -> None:
    env = Env(tmp_path)
    bad_cfg = {**VF_CONFIG, "opaque": {"driver": DRIVER_NAME, "parameters": {"kind": "VfConfig", "bogus": 1}}}
    ref = env.claims.add(claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")], [bad_cfg]))
    assert env.preparer.prepare([ref])["ua"].error.startswith("InvalidVfConfig:")


def test_kernel_mode_requires_a_netdevice(tmp_path: Path) -> None:
    env = Env(tmp_path)
    (env.sysfs / "devices/pci0000:16/0000:16:01.0/0000:17:00.1/net/ens1f0v0").rmdir()
    ref = env.claims.add(claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")]))
    assert env.preparer.prepare([ref])["ua"].error.startswith("VfNetdeviceMissing:")
    assert env.checkpoint.snapshot_all() == []


class RecordingDriver:
    """Stands in for the kernel: records binds/restores so rollback can be asserted."""

    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.calls: list[tuple[str, str, str]] = []

    def bind(self, bdf: str, driver: str) -> str:
        self.calls.append(("bind", bdf, driver))
        before = self.bound.get(bdf, "mlx5_core")
        if driver:
            self.bound[bdf] = driver
        return before if driver else ""

    def restore(self, bdf: str, original: str) -> None:
        self.calls.append(("restore", bdf, original))
        self.bound[bdf] = original or "mlx5_core"

    def verify_kernel_netdev(self, bdf: str) -> None:
        pass

    def iommu_group(self, bdf: str) -> str | None:
        return "42"

    def rdma(self, bdf: str) -> None:
        return None


def _vfio_config():
    params = {"apiVersion": f"{DRIVER_NAME}/v1alpha1", "kind": "VfConfig", "driver": "vfio-pci"}
    return {"source": "FromClass", "requests": [], "opaque": {"driver": DRIVER_NAME, "parameters": params}}


def test_vfio_binding_device_nodes_and_restore_on_unprepare(tmp_path: Path) -> None:
    drv = RecordingDriver()
    env = Env(tmp_path, drv)
    ref = env.claims.add(claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")], [_vfio_config()]))
    assert env.preparer.prepare([ref])["ua"].error == ""
    (cdev,) = env.spec("ua")["devices"]
    assert cdev["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/vfio/42", "hostPath": "/dev/vfio/42", "type": "c"},
        {"path": "/dev/vfio/vfio", "hostPath": "/dev/vfio/vfio", "type": "c"},
    ]
    assert "SRIOVNETWORK_0000_17_00_1_VFIO_DEVICE=/dev/vfio/42" in cdev["containerEdits"]["env"]
    assert prepared_claim(env.checkpoint, "ua").devices[0].original_driver == "mlx5_core"
    env.preparer.unprepare([ref])
    assert drv.bound["0000:17:00.1"] == "mlx5_core"


def test_checkpoint_write_failure_rolls_back_driver_and_cdi(tmp_path: Path) -> None:
    class Full:
        def read(self):
            return None

        def write(self, data):
            raise OSError(28, "No space left on device")

    drv = RecordingDriver()
    env = Env(tmp_path, drv)
    env.preparer = env.new_preparer(Full())
    ref = env.claims.add(
        claim("a", "ua", "pod-1", [("vf", "0000-17-00-1"), ("vf", "0000-17-00-2")], [_vfio_config()])
    )
    out = env.preparer.prepare([ref])["ua"]
    assert out.error.startswith("CheckpointWriteFailed:")
    assert [c for c in drv.calls if c[0] == "restore"] == [
        ("restore", "0000:17:00.2", "mlx5_core"),
        ("restore", "0000:17:00.1", "mlx5_core"),
    ]
    assert not env.cdi.exists("ua")


def test_unprepare_of_an_unrecorded_claim_removes_a_crash_leftover_cdi_spec(tmp_path: Path) -> None:
    """A kill between the claim's CDI write and its checkpoint record leaves the spec in no record;
    kubelet was never answered, and its unprepare removes the spec."""
    env = Env(tmp_path)
    ref = env.claims.add(claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")]))
    env.cdi.write("ua", {"cdiVersion": "0.5.0", "kind": "left/over", "devices": []})
    assert env.new_preparer().unprepare([ref]) == {"ua": ""}
    assert list(env.cdi.root.iterdir()) == []


def test_foreign_results_are_ignored_whatever_they_hold(tmp_path: Path) -> None:
    """Another driver's result is never ours to judge: an unknown pool and device, admin access, a
    share ID and a config our VfConfig schema would refuse change nothing for our device."""
    drv = RecordingDriver()
    env = Env(tmp_path, drv)
    gpu = {
        "request": "gpu",
        "driver": "gpu.example.com",
        "pool": "gpu-pool",
        "device": "gpu-7",
        "adminAccess": True,
        "shareID": "5f0c2d8e-0000-4000-8000-000000000001",
    }
    gpu_config = {
        "source": "FromClaim",
        "requests": ["gpu"],
        "opaque": {"driver": "gpu.example.com", "parameters": {"kind": "GpuConfig", "sharing": "mps"}},
    }
    mixed = env.claims.add(
        claim("m", "um", "pod-1", [("vf", "0000-17-00-1")], [VF_CONFIG, gpu_config], [gpu])
    )
    only_gpu = env.claims.add(claim("g", "ug", "pod-2", [], [gpu_config], [gpu]))
    out = env.preparer.prepare([mixed, only_gpu])

    assert out["um"].error == "" and [d.device for d in out["um"].devices] == ["0000-17-00-1"]
    assert [d["name"] for d in env.spec("um")["devices"]] == ["um-0000-17-00-1"]
    assert [d.device for d in env.checkpoint.snapshot_claim("um").devices] == ["0000-17-00-1"]  # type: ignore[union-attr]
    assert out["ug"].error == "" and out["ug"].devices == ()
    assert env.spec("ug")["devices"] == [] and not env.cdi.exists("pod-2")
    assert {c[1] for c in drv.calls} == {"0000:17:00.1"}
    assert env.preparer.unprepare([mixed, only_gpu]) == {"um": "", "ug": ""}
    assert list(env.cdi.root.iterdir()) == [] and env.checkpoint.snapshot_all() == []


def test_claim_still_prepared_for_an_old_pod_is_refused_for_a_new_one(tmp_path: Path) -> None:
    env = Env(tmp_path)
    obj = claim("a", "ua", "pod-1", [("vf", "0000-17-00-1")])
    ref = env.claims.add(obj)
    assert env.preparer.prepare([ref])["ua"].error == ""
    obj["status"]["reservedFor"] = [{"resource": "pods", "name": "pod-pod-2", "uid": "pod-2"}]
    out = env.preparer.prepare([ref])["ua"]
    assert out.error.startswith("ClaimReleaseInProgress:") and "pod-1" in out.error
    env.preparer.unprepare([ref])
    assert env.preparer.prepare([ref])["ua"].error == ""
    assert prepared_claim(env.checkpoint, "ua").pod_uid == "pod-2"
