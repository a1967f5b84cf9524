"""Device info of a managed shadow (spec 10.4): from the driver's frozen annotation into the
interface's network-status `device-info` and Multus's CNIDeviceInfoFile; DEL removes the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cni_shim.core import netstatus
from cni_shim.node.devinfofiles import NodeDeviceInfoFiles
from sriov_contract import keys
from testbed.managed_shadows import POD_UID, managed_shadow, registry_annotation

NS = "ns1"
ARGS = f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}"
INFO = {"version": 1, "pciAddress": "0000:03:00.1", "pfPciAddress": "0000:03:00.0", "rdmaDevice": "mlx5_1"}
EXPECTED = {
    "type": "pci",
    "version": "1.1.0",
    "pci": {"pci-address": "0000:03:00.1", "rdma-device": "mlx5_1", "pf-pci-address": "0000:03:00.0"},
}


def _setup(shim: Any, info: dict[str, Any] | None = INFO) -> dict[str, Any]:
    shadow = managed_shadow(namespace=NS, pod_name="pod1")
    if info is not None:
        shadow["nad"]["metadata"]["annotations"][keys.DEVICE_INFO_ANNOTATION] = json.dumps(info)
    annotations = {
        keys.NETWORKS_ANNOTATION: json.dumps([shadow["selection"]]),
        keys.REGISTRY_ANNOTATION: registry_annotation(POD_UID, [shadow["entry"]]),
    }
    shim.kube.add_pod(NS, "pod1", POD_UID, annotations)
    shim.kube.nads[(NS, shadow["name"])] = shadow["nad"]
    return shadow


def _status(shim: Any) -> list[dict[str, Any]]:
    pod = shim.kube.status_writes[-1]
    return list(json.loads(pod["metadata"]["annotations"][keys.NETWORK_STATUS_ANNOTATION]))


def _devinfo_path(shadow: dict[str, Any]) -> str:
    return f"/var/run/k8s.cni.cncf.io/devinfo/cni/{NS}-{shadow['name']}-c1_dra0"


def test_the_pci_device_info_is_multus_shape_without_empty_members() -> None:
    assert netstatus.pci_device_info("0000:03:00.1", "0000:03:00.0", "mlx5_1") == EXPECTED
    assert netstatus.pci_device_info("0000:03:00.1") == {
        "type": "pci",
        "version": "1.1.0",
        "pci": {"pci-address": "0000:03:00.1"},
    }


def test_add_publishes_device_info_and_writes_the_file_del_removes_it(shim: Any) -> None:
    shadow = _setup(shim)
    assert shim.run("ADD", shim.conf(), args=ARGS).status == 0
    sriov = next(e for e in _status(shim) if e["name"] == f"{NS}/{shadow['name']}")
    assert sriov["device-info"] == EXPECTED
    assert list(sriov)[-2:] == ["dns", "device-info"]  # Multus's field order
    path = _devinfo_path(shadow)
    assert json.loads(shim.device_info_files[path]) == EXPECTED
    assert shim.plan_doc()["delegates"][1]["deviceInfo"] == EXPECTED
    assert "deviceInfo" not in shim.plan_doc()["delegates"][0]  # the cluster network has none
    # A retried ADD writes the same file again (idempotent), never fails on an existing one.
    assert shim.run("ADD", shim.conf(), args=ARGS).status == 0
    assert json.loads(shim.device_info_files[path]) == EXPECTED
    assert shim.run("DEL", shim.conf(), args=ARGS).status == 0
    assert path not in shim.device_info_files
    assert shim.device_info_files.ops[-1] == ("remove", path)


def test_a_shadow_without_device_info_publishes_none_and_writes_no_file(shim: Any) -> None:
    _setup(shim, info=None)
    assert shim.run("ADD", shim.conf(), args=ARGS).status == 0
    assert all("device-info" not in e for e in _status(shim))
    assert dict(shim.device_info_files) == {}


def test_device_info_of_another_vf_or_malformed_is_refused_before_any_delegate(shim: Any) -> None:
    for info, reason in (
        (dict(INFO, pciAddress="0000:03:00.2"), "ManagedShadowPciMismatch"),
        (dict(INFO, rdmaDevice=True), "ManagedShadowBindingInvalid"),
    ):
        shim.executor.calls.clear()
        _setup(shim, info)
        out = shim.run("ADD", shim.conf(), args=ARGS)
        assert out.json["details"] == reason
        assert shim.executor.commands() == []


def test_node_files_are_replaced_whole_read_only_and_removal_is_idempotent(tmp_path: Path) -> None:
    files = NodeDeviceInfoFiles()
    path = str(tmp_path / "devinfo" / "cni" / "ns-x-c1_net1")
    files.write(path, b"{}")
    files.write(path, b'{"a":1}')
    assert Path(path).read_bytes() == b'{"a":1}'
    assert Path(path).stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in Path(path).parent.iterdir()) == ["ns-x-c1_net1"]
    files.remove(path)
    files.remove(path)
    assert not Path(path).exists()


def test_a_del_without_its_cache_still_removes_the_file(shim: Any) -> None:
    shadow = _setup(shim)
    assert shim.run("ADD", shim.conf(), args=ARGS).status == 0
    path = _devinfo_path(shadow)
    assert path in shim.device_info_files
    (shim.cni_dir / "c1").unlink()  # the delegate cache is lost; the Pod and shadow are still there
    assert shim.run("DEL", shim.conf(), args=ARGS).status == 0
    assert path not in shim.device_info_files
