import json
import subprocess
import sys

import pytest

from testbed.fakenode import STATE_FILE, TWO_RAIL, FakeNode, load_two_rail, teardown
from testbed.netlinks import ns_links
from testbed.waiting import wait_for
from tests.support.cni import REPO

pytestmark = pytest.mark.netns


def host_links(prefix):
    links = json.loads(
        subprocess.run(["ip", "-j", "link"], capture_output=True, text=True, check=True).stdout
    )
    return sorted(link["ifname"] for link in links if link["ifname"].startswith(prefix))


def netns_names():
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {n["name"] for n in json.loads(out or "[]")}


def assert_gone(node_root, prefix):
    assert host_links(prefix) == []
    assert f"fakesriov-{prefix}" not in netns_names()
    assert not node_root.exists() or list(node_root.iterdir()) == []


def test_up_creates_real_links_and_down_removes_everything(tmp_path):
    root = tmp_path / "sys"
    node = FakeNode.up(load_two_rail(), root)
    try:
        expected = sorted([pf.netdev for pf in node.pfs] + [vf.netdev for vf in node.vfs])
        assert host_links(node.prefix) == expected
        shown = json.loads(
            subprocess.run(
                ["ip", "-j", "link", "show", node.vfs[0].netdev], capture_output=True, text=True
            ).stdout
        )
        assert shown[0]["address"] == node.vfs[0].mac
        assert (root / "bus/pci/devices" / node.vfs[0].pci / "net" / node.vfs[0].netdev).is_dir()
        assert all(s["present"] for s in node.status()["vfs"])
    finally:
        node.down()
    assert_gone(root, node.prefix)
    node.down()  # idempotent
    assert_gone(root, node.prefix)


def test_down_also_destroys_vfs_that_live_in_a_container_netns(tmp_path, netns):
    ns = netns()
    node = FakeNode.up(load_two_rail(), tmp_path / "sys")
    vf = node.vfs[0]
    subprocess.run(["ip", "link", "set", vf.netdev, "netns", ns.rsplit("/", 1)[1]], check=True)
    node.down()
    wait_for(lambda: list(ns_links(ns)) == ["lo"], 10.0, what=f"{vf.netdev} to vanish from {ns}")
    assert_gone(tmp_path / "sys", node.prefix)


def test_teardown_after_a_crashed_creator(tmp_path):
    root = tmp_path / "sys"
    # A separate process brings the node up and dies without cleaning anything.
    code = (
        "import os, sys, yaml; from pathlib import Path; from testbed.fakenode import FakeNode;"
        f"FakeNode.up(yaml.safe_load(open({str(TWO_RAIL)!r})), Path({str(root)!r})); os._exit(9)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    prefix = json.loads((root / STATE_FILE).read_text())["prefix"]
    assert len(host_links(prefix)) == 10
    teardown(root)
    assert_gone(root, prefix)


def test_prefix_sweep_when_the_state_file_is_lost(tmp_path):
    root = tmp_path / "sys"
    node = FakeNode.up(load_two_rail(), root)
    (root / STATE_FILE).unlink()
    teardown(root, prefix=node.prefix)
    assert_gone(root, node.prefix)


def test_cli_up_status_down(tmp_path):
    root = tmp_path / "sys"
    script = str(REPO / "scripts/fake-sriov-node")
    up = subprocess.run(
        [script, "up", "--topology", str(TWO_RAIL), "--sysfs-root", str(root)], capture_output=True, text=True
    )
    assert up.returncode == 0, up.stderr
    prefix = json.loads(up.stdout)["prefix"]
    try:
        again = subprocess.run(
            [script, "up", "--topology", str(TWO_RAIL), "--sysfs-root", str(root)],
            capture_output=True,
            text=True,
        )
        assert again.returncode == 1 and "FakeNodeExists" in again.stderr and "Traceback" not in again.stderr
        status = json.loads(
            subprocess.run(
                [script, "status", "--sysfs-root", str(root)], capture_output=True, text=True, check=True
            ).stdout
        )
        assert [g["pcie_root"] for g in status["gpus"]] == ["pci0000:16", "pci0000:85"]
    finally:
        subprocess.run([script, "down", "--sysfs-root", str(root)], check=True)
    assert_gone(root, prefix)


def test_bind_switches_driver_link(fake_node):
    vf = fake_node.vfs[2]
    fake_node.bind(vf.pci, "vfio-pci")
    assert fake_node.driver_of(vf.pci) == "vfio-pci"
    assert not (fake_node.sysfs_root / "class/net" / vf.netdev).exists()
    fake_node.bind(vf.pci, vf.driver)
    assert fake_node.driver_of(vf.pci) == "mlx5_core"
    assert (fake_node.sysfs_root / "class/net" / vf.netdev).exists()


def test_heal_brings_back_a_vf_lost_with_its_netns(fake_node, netns):
    ns = netns()
    lost, kept = fake_node.vfs[1], fake_node.vfs[2]
    moved = fake_node.vfs[3]
    for vf in (lost, moved):
        subprocess.run(["ip", "link", "set", vf.netdev, "netns", ns.rsplit("/", 1)[1]], check=True)
    subprocess.run(["ip", "netns", "del", ns.rsplit("/", 1)[1]], check=True)
    wait_for(
        lambda: fake_node.lost() == [lost.netdev, moved.netdev],
        10.0,
        what="veth pairs to die with their netns",
    )
    assert fake_node.heal() == [lost.netdev, moved.netdev]
    for vf in (lost, kept, moved):
        shown = json.loads(
            subprocess.run(
                ["ip", "-j", "link", "show", vf.netdev], capture_output=True, text=True, check=True
            ).stdout
        )
        assert shown[0]["address"] == vf.mac
    assert fake_node.heal() == []


def test_pf_link_down_and_a_vanished_vf_show_as_the_driver_reads_them(tmp_path):
    from sriov_dra.core.devicehealth import judge_all  # noqa: PLC0415
    from sriov_dra.model import device_name  # noqa: PLC0415
    from sriov_dra.sysfs.discovery import discover  # noqa: PLC0415
    from sriov_dra.sysfs.linkstate import observe  # noqa: PLC0415

    root = tmp_path / "sys"
    node = FakeNode.up(load_two_rail(), root)
    try:
        inventory = discover(root)
        pf, other = node.pfs
        assert all(v.healthy for v in judge_all(observe(root, inventory)).values())

        node.set_pf_link(pf.netdev, up=False)
        shown = json.loads(
            subprocess.run(["ip", "-j", "link", "show", pf.netdev], capture_output=True, text=True).stdout
        )
        assert "UP" not in shown[0]["flags"]
        verdicts = judge_all(observe(root, inventory))
        down = {name for name, v in verdicts.items() if v.reason == "PFLinkDown"}
        assert down == {name for name, vf in inventory.items() if vf.pf_name == pf.netdev}
        node.set_pf_link(pf.netdev, up=True)

        gone = other.vfs[0]
        node.remove_vf(gone.pci)
        assert set(discover(root)) == set(inventory) - {device_name(gone.pci)}
        missing = {n for n, v in judge_all(observe(root, inventory)).items() if not v.healthy}
        assert [inventory[n].pci_address for n in missing] == [gone.pci]
        node.restore_vf(gone.pci)
        assert discover(root) == inventory
        assert all(v.healthy for v in judge_all(observe(root, inventory)).values())
    finally:
        node.down()
