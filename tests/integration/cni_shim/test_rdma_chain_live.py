"""A managed shadow whose chain is sriov then rdma (issue 32 item 4), with the driver's device-info
annotation, through the real shim executable and the live API server. The recording test plugin
stands in for both sriov and rdma: this kernel has no RDMA, so no RDMA device can really move, but
the order, the deviceID each plugin gets, network-status device-info and the CNIDeviceInfoFile's
life (written on ADD, gone after DEL) are the product's."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed.apiobjects import annotations_of
from testbed.cluster import NAD_API
from testbed.cni_daemon import CNI_RULES, CNI_USER
from testbed.cni_objects import bind_by_hand, create_pod
from tests.integration.cni_shim.test_live_api import _args, _conf, _shim
from tests.support.cni_daemon import shim_bin_dir

pytestmark = [pytest.mark.integration, pytest.mark.netns]

PCI = "0000:03:00.1"
DEVINFO_DIR = "/var/run/k8s.cni.cncf.io/devinfo/cni"


@pytest.fixture(scope="module")
def cni_kubeconfig(testbed: Any) -> Path:
    testbed.grant(CNI_USER, CNI_RULES)
    path: Path = testbed.kubeconfig_for("cni")
    return path


@pytest.fixture
def rdma_bin(tmp_path: Path, cni_bin_dir: Path) -> Path:
    out = shim_bin_dir(tmp_path / "bin", cni_bin_dir, "multus")
    (out / "rdma").symlink_to(cni_bin_dir / "recorder")
    return out


def test_sriov_then_rdma_with_device_info_add_and_del(
    testbed: Any, k8s_namespace: str, cni_kubeconfig: Path, rdma_bin: Path, netns: Any, tmp_path: Path
) -> None:
    api = testbed.api_client
    ns = k8s_namespace
    log = tmp_path / "calls.jsonl"
    pod = create_pod(api, ns, "workload", testbed.node_name, {})
    uid = pod["metadata"]["uid"]
    chain = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "rail-a",
            "plugins": [
                {"type": "sriov", "deviceID": PCI, "logFile": str(log)},
                {"type": "rdma", "deviceID": PCI, "logFile": str(log)},
            ],
        },
        separators=(",", ":"),
    )
    shadow, _ = bind_by_hand(api, pod, testbed.node_name, chain, pci=PCI)
    objs = client.CustomObjectsApi(api)
    info = {"version": 1, "pciAddress": PCI, "pfPciAddress": "0000:03:00.0", "rdmaDevice": "mlx5_1"}
    objs.patch_namespaced_custom_object(
        *NAD_API[:2],
        ns,
        NAD_API[2],
        shadow["name"],
        {"metadata": {"annotations": {keys.DEVICE_INFO_ANNOTATION: json.dumps(info)}}},
    )
    conf = _conf(tmp_path, cni_kubeconfig, log)
    sandbox = netns()
    cid = f"rdma{uid[:8]}"
    try:
        add = _shim(rdma_bin, "ADD", conf, cid, sandbox, _args(ns, "workload", uid))
        assert add.returncode == 0, add.stdout + add.stderr
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        assert [(c["command"], c["stdin"]["type"], c["stdin"]["deviceID"]) for c in calls] == [
            ("ADD", "sriov", PCI),
            ("ADD", "rdma", PCI),
        ]
        expected = {
            "type": "pci",
            "version": "1.1.0",
            "pci": {"pci-address": PCI, "rdma-device": "mlx5_1", "pf-pci-address": "0000:03:00.0"},
        }
        live = client.CoreV1Api(api).read_namespaced_pod("workload", ns)
        status = json.loads(annotations_of(live)[keys.NETWORK_STATUS_ANNOTATION])
        (entry,) = [s for s in status if s["name"] == f"{ns}/{shadow['name']}"]
        assert entry["device-info"] == expected
        path = os.path.join(DEVINFO_DIR, f"{ns}-{shadow['name']}-{cid}_dra0")
        assert json.loads(Path(path).read_text()) == expected

        rm = _shim(rdma_bin, "DEL", conf, cid, sandbox, _args(ns, "workload", uid))
        assert rm.returncode == 0, rm.stdout + rm.stderr
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        assert [(c["command"], c["stdin"]["type"]) for c in calls[2:]] == [("DEL", "rdma"), ("DEL", "sriov")]
        assert not os.path.exists(path)
    finally:
        for leftover in glob.glob(os.path.join(DEVINFO_DIR, f"*-{cid}_*")):
            os.unlink(leftover)
        objs.patch_namespaced_custom_object(
            *NAD_API[:2], ns, NAD_API[2], shadow["name"], {"metadata": {"finalizers": None}}
        )
