"""RDMA into the Pod (issue 32) on the real control plane, driver, CNI and kubelet with containerd
and runc: the fake node's rail-a PF has RDMA (sysfs entries and harmless character devices under
its device root), rail-b's has none. The Pod of the GPU/NIC pairs example gets exactly its own
VF's verbs node and rdma_cm through CDI, upstream's variables, and Multus device-info in
network-status and the CNIDeviceInfoFile, which its DEL removes.

This kernel has no RDMA: the device nodes carry /dev/null's numbers, so what is proven is the
plumbing (discovery, CDI, runc, network-status), not verbs traffic.
"""

from __future__ import annotations

import glob
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from sriov_contract import keys
from sriov_dra.model import device_name
from testbed.fakenode import load_two_rail_rdma
from testbed.scenario import running_pairs
from testbed.stack import Stack, Stacks

pytestmark = [pytest.mark.integration, pytest.mark.netns]

DEVINFO_DIR = "/var/run/k8s.cni.cncf.io/devinfo/cni"


@pytest.fixture
def rdma_stack(stacks: Stacks, real_kubelet: None) -> Stack:
    return stacks.get(thick=True, topology=load_two_rail_rdma())


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_the_container_holds_its_own_rdma_devices_and_network_status_names_them(rdma_stack: Stack) -> None:
    stack = rdma_stack
    node = stack.fake_node
    files: list[str] = []
    with running_pairs(stack) as run:
        obs = run.observe()
        rows = {r.rail: r for r in obs.rows}
        rdma_vf, plain_vf = node.vf(rows["rail-a"].vf_pci), node.vf(rows["rail-b"].vf_pci)
        assert rdma_vf.rdma_device and rdma_vf.uverbs and not plain_vf.rdma_device
        # Other VFs of the rail-a PF have verbs nodes too: the Pod must see only its own.
        others = {vf.uverbs for vf in node.rail_vfs("rail-a")} - {rdma_vf.uverbs}
        assert others

        container = run.pod["spec"]["containers"][0]["name"]
        pid = stack.node_runtime.container_pid(str(obs.uid), container)
        infiniband = Path(f"/proc/{pid}/root/dev/infiniband")
        assert sorted(p.name for p in infiniband.iterdir()) == sorted([rdma_vf.uverbs, "rdma_cm"])
        assert all(stat.S_ISCHR(p.stat().st_mode) for p in infiniband.iterdir())

        env = _environ(pid)
        infix = device_name(rdma_vf.pci).replace("-", "_")
        assert env[f"SRIOVNETWORK_{infix}_RDMA_DEVICE"] == rdma_vf.rdma_device
        assert env[f"SRIOVNETWORK_{infix}_RDMA_UVERB"] == f"/dev/infiniband/{rdma_vf.uverbs}"
        assert env[f"SRIOVNETWORK_{infix}_RDMA_CM"] == "/dev/infiniband/rdma_cm"
        plain_infix = device_name(plain_vf.pci).replace("-", "_")
        assert not [k for k in env if k.startswith(f"SRIOVNETWORK_{plain_infix}_RDMA_")]

        status = json.loads(obs.pod["metadata"]["annotations"][keys.NETWORK_STATUS_ANNOTATION])
        by_name = {e["name"]: e for e in status}
        namespace = obs.pod["metadata"]["namespace"]
        for row, vf in ((rows["rail-a"], rdma_vf), (rows["rail-b"], plain_vf)):
            expected: dict[str, Any] = {
                "type": "pci",
                "version": "1.1.0",
                "pci": {"pci-address": vf.pci, "pf-pci-address": vf.pf_pci},
            }
            if vf.rdma_device:
                expected["pci"]["rdma-device"] = vf.rdma_device
            entry = by_name[f"{namespace}/{row.shadow_nad}"]
            assert entry["interface"] == row.interface
            assert entry["device-info"] == expected
            (path,) = glob.glob(os.path.join(DEVINFO_DIR, f"{namespace}-{row.shadow_nad}-*_{row.interface}"))
            assert json.loads(Path(path).read_text()) == expected
            files.append(path)
    # The Pod's DEL removed its device-info files (running_pairs also checked nothing else is left).
    assert [p for p in files if os.path.exists(p)] == []
