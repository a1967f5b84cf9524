"""`sriov-operator node-state` against the real API server, under its shipped RBAC
(deploy/operator/node-state.yaml), reading a sysfs-shaped tree laid out as the kernel does
(testbed/fakesysfs.py); and the node-policy controller detecting overlap from what it wrote."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.deployment import NODE_STATE_SA, service_account_user
from testbed.fakenode import load_two_rail
from testbed.fakesysfs import FakeSysfs
from testbed.operator import issue_node_state_identity
from testbed.sriov_topology import NodePlan, parse_topology, plan_node
from testbed.waiting import wait_for
from tests.integration.operator.conftest import DUAL_RAIL

pytestmark = pytest.mark.integration

DRA = "DRAConfigurationReady"
REPORTER = str(Path(sys.executable).parent / "sriov-operator")


@pytest.fixture
def sysfs(tmp_path: Path) -> tuple[FakeSysfs, NodePlan]:
    plan = plan_node(parse_topology(load_two_rail()), "ns1")
    tree = FakeSysfs(tmp_path / "sys", plan)
    tree.create()
    return tree, plan


@pytest.fixture
def reporter_kubeconfig(testbed, operator_namespace) -> Path:
    path: Path = testbed.kubeconfig_for(issue_node_state_identity(testbed, operator_namespace))
    return path


def reporter_cmd(kubeconfig: Path, namespace: str, node: str, root: Path, *args: str) -> list[str]:
    return [
        REPORTER, "--namespace", namespace, "--kubeconfig", str(kubeconfig),
        "node-state", "--node-name", node, "--sysfs-root", str(root), *args,
    ]  # fmt: skip


@pytest.fixture
def running_reporter(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(cmd: list[str]) -> subprocess.Popen[bytes]:
        with (tmp_path / "reporter.log").open("ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def test_reports_the_sysfs_inventory_and_an_unchanged_node_writes_nothing(
    cluster, sysfs, reporter_kubeconfig, testbed
) -> None:
    tree, plan = sysfs
    node = "reported-node"
    cmd = reporter_cmd(reporter_kubeconfig, cluster.ns, node, tree.root, "--once")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    state = cluster.get("sriovnetworknodestates", node)
    assert state is not None
    interfaces = state["status"]["interfaces"]
    assert [(i["name"], i["pciAddress"], i["numVfs"], i["totalvfs"], i["linkType"]) for i in interfaces] == [
        (pf.netdev, pf.pci, len(pf.vfs), pf.total_vfs, "ETH") for pf in sorted(plan.pfs, key=lambda p: p.pci)
    ]
    assert {vf["pciAddress"]: (vf["deviceID"], vf["name"]) for i in interfaces for vf in i["Vfs"]} == {
        vf.pci: (vf.device, vf.netdev) for vf in plan.vfs
    }
    user = service_account_user(cluster.ns, NODE_STATE_SA)[0]
    mark = testbed.audit.mark()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert again.returncode == 0, again.stderr
    events = testbed.audit.events(since=mark, user=user)
    assert [e.verb for e in events] == ["get"]


def test_a_reporter_without_sysfs_fails_visibly_and_writes_nothing(
    cluster, reporter_kubeconfig, tmp_path
) -> None:
    cmd = reporter_cmd(reporter_kubeconfig, cluster.ns, "n", tmp_path / "absent", "--once")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert "NodeInventoryUnreadable" in out.stderr + out.stdout
    assert cluster.get("sriovnetworknodestates", "n") is None


def policy(name: str, selector: dict[str, Any], rail: str) -> dict[str, Any]:
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": name},
        "spec": {
            "resourceName": "sriov_vfs",
            "nodeSelector": dict(DUAL_RAIL),
            "numVfs": 2,
            "nicSelector": {"vendor": "15b3", **selector},
            "dra": {"attributes": {"example.com/rail": {"string": rail}}},
        },
    }


def test_overlap_detection_reads_the_reported_inventory_and_follows_sysfs(
    cluster, sysfs, reporter_kubeconfig, start_operator, running_reporter
) -> None:
    tree, plan = sysfs
    pf_a, pf_b = sorted(plan.pfs, key=lambda p: p.pci)
    cluster.operator_config(dra=True)
    node = cluster.add_node(DUAL_RAIL)
    running_reporter(reporter_cmd(reporter_kubeconfig, cluster.ns, node, tree.root, "--interval", "0.5"))
    start_operator("--controllers", "node-policy")
    # by PF name and by PF PCI address: only the reported inventory says these are different PFs
    cluster.put("sriovnetworknodepolicies", policy("by-name", {"pfNames": [pf_a.netdev]}, "a"))
    cluster.put("sriovnetworknodepolicies", policy("by-root", {"rootDevices": [pf_b.pci]}, "b"))
    for name in ("by-name", "by-root"):
        cluster.wait_condition("sriovnetworknodepolicies", name, DRA, "DRAConfigurationApplied")
    # The policies can be Applied before the reporter's first write puts this node in the plan.
    wait_for(
        lambda: (
            len(
                ((cluster.generated("sriovresourcepolicies").get(node) or {}).get("spec") or {}).get(
                    "configs"
                )
                or []
            )
            == 2
        ),
        20,
        what="the node's SriovResourcePolicy with both configs",
    )
    # the same PF as by-name, through its PCI address, with a different map: the node is withdrawn
    cluster.put("sriovnetworknodepolicies", policy("also-a", {"rootDevices": [pf_a.pci]}, "other"))
    for name in ("by-name", "also-a"):
        cond = cluster.wait_condition("sriovnetworknodepolicies", name, DRA, "ConflictingDRAMapping")
        assert node in cond["message"]
    assert cluster.generated("sriovresourcepolicies")[node]["spec"]["configs"] == []
    # the running reporter follows sysfs: a VF moved to vfio-pci shows up in the node state
    moved = pf_b.vfs[0]
    tree.bind(moved.pci, "vfio-pci", moved.netdev)

    def driver_of_moved() -> str | None:
        state = cluster.get("sriovnetworknodestates", node) or {}
        vfs = [vf for i in state["status"]["interfaces"] for vf in i.get("Vfs") or []]
        return next((vf.get("driver") for vf in vfs if vf["pciAddress"] == moved.pci), None)

    wait_for(lambda: driver_of_moved() == "vfio-pci", 20, what="the reporter to see the rebind")
