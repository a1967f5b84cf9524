"""The demo's RDMA column: read from network-status device-info, '-' where there is none."""

import json
from dataclasses import replace

from sriov_contract import keys
from testbed.observation import _device_infos
from testbed.results import COLUMNS, Row, render_table


def test_the_rdma_device_comes_from_network_status_device_info() -> None:
    status = [
        {
            "name": "ns/a",
            "device-info": {"type": "pci", "pci": {"pci-address": "x", "rdma-device": "mlx5_0"}},
        },
        {"name": "ns/b", "device-info": {"type": "pci", "pci": {"pci-address": "y"}}},
        {"name": "podnet"},
    ]
    pod = {"metadata": {"annotations": {keys.NETWORK_STATUS_ANNOTATION: json.dumps(status)}}}
    assert _device_infos(pod) == {"ns/a": "mlx5_0"}
    assert _device_infos({"metadata": {"annotations": {keys.NETWORK_STATUS_ANNOTATION: "["}}}) == {}
    assert _device_infos({}) == {}


def test_the_table_has_an_rdma_column() -> None:
    row = Row("nic-0", "gpu-0", "0000:17:00.2", "pci0000:16", "rail-a", "ns/src", "dra-sriov-x", "dra0", "ip")
    assert row.rdma == "-" and COLUMNS[-1] == "RDMA"
    assert render_table([replace(row, rdma="mlx5_0")]).splitlines()[2].endswith("mlx5_0")
