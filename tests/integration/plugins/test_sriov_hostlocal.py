"""The sriov test plugin over the fake two-rail node, with the real host-local IPAM plugin."""

import ipaddress
import json
import os
import subprocess

import pytest

from testbed.netlinks import host_link, ipv4_addresses, ns_links
from tests.support.cni import assert_vf_home, run_cni, run_cnitool

pytestmark = pytest.mark.netns


def ns_name(path):
    return path.rsplit("/", 1)[1]


def sriov_conf(vf, ipam_dir, data_dir, name=None, **extra):
    return {
        "cniVersion": "1.0.0",
        "name": name or vf.rail,
        "type": "sriov",
        "deviceID": vf.pci,
        "dataDir": str(data_dir),
        "ipam": {"type": "host-local", "subnet": vf.subnet, "dataDir": str(ipam_dir)},
        **extra,
    }


def leases(ipam_dir, network):
    d = ipam_dir / network
    return sorted(p.name for p in d.iterdir() if p.name[0].isdigit()) if d.exists() else []


@pytest.fixture
def call(cni_bin_dir, fake_node):
    def run(command, conf, netns, container_id="c1", ifname="net1", **kw):
        return run_cni(
            "sriov",
            command,
            conf,
            bin_dir=cni_bin_dir,
            container_id=container_id,
            netns=netns,
            ifname=ifname,
            env=fake_node.env(),
            **kw,
        )

    return run


def test_add_gives_rail_address_and_del_returns_vf_and_frees_lease(
    call, fake_node, netns, tmp_path, cni_data_dir
):
    ns, ipam_dir = netns(), tmp_path / "ipam"
    vf = fake_node.rail_vfs("rail-a")[1]
    conf = sriov_conf(vf, ipam_dir, cni_data_dir, mac="02:11:22:33:44:55")
    add = call("ADD", conf, ns)
    assert add.returncode == 0, add.stdout + add.stderr
    inside = ns_links(ns)["net1"]
    (address,) = ipv4_addresses(inside)
    assert ipaddress.ip_interface(address).network == ipaddress.ip_network(vf.subnet)
    assert inside["address"] == "02:11:22:33:44:55" and "UP" in inside["flags"]
    assert host_link(vf.netdev) is None
    result = add.json
    assert result["interfaces"] == [{"name": "net1", "mac": "02:11:22:33:44:55", "mtu": 1500, "sandbox": ns}]
    assert result["ips"] == [{"address": address, "gateway": "192.0.2.1", "interface": 0}]
    assert leases(ipam_dir, "rail-a") == [address.split("/")[0]]
    cache = json.loads((cni_data_dir / "c1-net1").read_text())
    assert cache["OrigVfState"]["HostIFName"] == vf.netdev and cache["deviceID"] == vf.pci

    delete = call("DEL", conf, ns)
    assert delete.returncode == 0, delete.stdout
    assert_vf_home(vf)
    assert list(ns_links(ns)) == ["lo"]
    assert leases(ipam_dir, "rail-a") == []
    assert not (cni_data_dir / "c1-net1").exists() and not (cni_data_dir / "pci" / vf.pci).exists()
    again = call("DEL", conf, ns)
    assert (again.returncode, again.stdout) == (0, "")


def test_two_vfs_of_two_rails_in_one_netns_use_their_own_subnets(
    call, fake_node, netns, tmp_path, cni_data_dir
):
    ns, ipam_dir = netns(), tmp_path / "ipam"
    a, b = fake_node.rail_vfs("rail-a")[0], fake_node.rail_vfs("rail-b")[0]
    conf_a, conf_b = sriov_conf(a, ipam_dir, cni_data_dir), sriov_conf(b, ipam_dir, cni_data_dir)
    assert call("ADD", conf_a, ns, ifname="net1").returncode == 0
    assert call("ADD", conf_b, ns, ifname="net2").returncode == 0
    links = ns_links(ns)
    assert ipaddress.ip_interface(ipv4_addresses(links["net1"])[0]).network == ipaddress.ip_network(
        "192.0.2.0/24"
    )
    assert ipaddress.ip_interface(ipv4_addresses(links["net2"])[0]).network == ipaddress.ip_network(
        "198.51.100.0/24"
    )
    assert call("DEL", conf_b, ns, ifname="net2").returncode == 0
    assert call("DEL", conf_a, ns, ifname="net1").returncode == 0
    assert_vf_home(a)
    assert_vf_home(b)
    assert leases(ipam_dir, "rail-a") == leases(ipam_dir, "rail-b") == []


def test_result_in_requested_older_version(call, fake_node, netns, tmp_path, cni_data_dir):
    ns = netns()
    vf = fake_node.vfs[0]
    conf = sriov_conf(vf, tmp_path / "ipam", cni_data_dir) | {"cniVersion": "0.4.0"}
    add = call("ADD", conf, ns)
    assert add.returncode == 0, add.stdout
    assert add.json["cniVersion"] == "0.4.0"
    assert add.json["ips"][0]["version"] == "4" and "mtu" not in add.json["interfaces"][0]
    assert call("DEL", conf, ns).returncode == 0


def test_disabled_link_state_is_applied_and_what_a_veth_lacks_is_recorded(
    call, fake_node, netns, tmp_path, cni_data_dir
):
    ns, ipam_dir = netns(), tmp_path / "ipam"
    vf = fake_node.rail_vfs("rail-b")[0]
    unapplied = {
        "vlan": 100,
        "vlanQoS": 3,
        "vlanProto": "802.1ad",
        "trust": "on",
        "spoofchk": "off",
        "min_tx_rate": 100,
        "max_tx_rate": 1000,
    }
    conf = sriov_conf(vf, ipam_dir, cni_data_dir, link_state="disable", mac="02:aa:bb:cc:dd:01", **unapplied)
    add = call("ADD", conf, ns)
    assert add.returncode == 0, add.stdout + add.stderr
    inside = ns_links(ns)["net1"]
    assert "UP" not in inside["flags"] and inside["operstate"] == "DOWN"
    assert inside["address"] == "02:aa:bb:cc:dd:01" and inside["mtu"] == add.json["interfaces"][0]["mtu"]
    (address,) = ipv4_addresses(inside)  # IPAM still configures a link that stays down
    assert ipaddress.ip_interface(address).network == ipaddress.ip_network(vf.subnet)

    cache = json.loads((cni_data_dir / "c1-net1").read_text())
    assert {k: cache[k] for k in unapplied} == unapplied and cache["link_state"] == "disable"
    assert cache["MAC"] == "02:aa:bb:cc:dd:01" and cache["deviceID"] == vf.pci

    assert call("DEL", conf, ns).returncode == 0
    assert_nothing_left(ns, ipam_dir, cni_data_dir, vf, vf.rail)


def test_link_state_outside_sriov_cnis_values_is_refused(call, fake_node, netns, tmp_path, cni_data_dir):
    ns, ipam_dir = netns(), tmp_path / "ipam"
    vf = fake_node.rail_vfs("rail-b")[0]
    add = call("ADD", sriov_conf(vf, ipam_dir, cni_data_dir, link_state="down"), ns)
    assert add.returncode != 0 and "link_state" in add.json["msg"] + add.json.get("details", "")
    assert_nothing_left(ns, ipam_dir, cni_data_dir, vf, vf.rail)


def assert_nothing_left(ns, ipam_dir, data_dir, vf, network):
    assert list(ns_links(ns)) == ["lo"]
    assert_vf_home(vf)
    assert leases(ipam_dir, network) == []
    assert not list(data_dir.glob("c*-net*")) and not (data_dir / "pci" / vf.pci).exists()


def test_bad_device_id(call, fake_node, netns, tmp_path, cni_data_dir):
    ns, ipam_dir = netns(), tmp_path / "ipam"
    vf = fake_node.vfs[0]
    conf = sriov_conf(vf, ipam_dir, cni_data_dir) | {"deviceID": "0000:af:06.0"}
    add = call("ADD", conf, ns)
    assert add.returncode == 1
    path = fake_node.sysfs_root / "bus/pci/devices/0000:af:06.0/physfn/net"
    assert add.json == {
        "cniVersion": "1.0.0",
        "code": 999,
        "msg": "SRIOV-CNI failed to load netconf: LoadConf(): failed to get VF information: "
        f'"lstat {path}: no such file or directory"',
    }
    assert_nothing_left(ns, ipam_dir, cni_data_dir, vf, vf.rail)


def test_vf_already_in_use(call, fake_node, netns, tmp_path, cni_data_dir):
    first, second, ipam_dir = netns(), netns(), tmp_path / "ipam"
    vf = fake_node.vfs[0]
    conf = sriov_conf(vf, ipam_dir, cni_data_dir)
    assert call("ADD", conf, first, container_id="c1").returncode == 0
    lease = leases(ipam_dir, vf.rail)
    busy = call("ADD", conf, second, container_id="c2")
    assert busy.returncode == 1
    assert busy.json["code"] == 999 and busy.json["msg"] == f"pci address {vf.pci} is already allocated"
    assert list(ns_links(second)) == ["lo"]
    assert leases(ipam_dir, vf.rail) == lease  # the second ADD never reached IPAM
    assert call("DEL", conf, first, container_id="c1").returncode == 0
    assert_nothing_left(first, ipam_dir, cni_data_dir, vf, vf.rail)


def test_missing_netns(call, fake_node, tmp_path, cni_data_dir):
    vf, ipam_dir = fake_node.vfs[0], tmp_path / "ipam"
    conf = sriov_conf(vf, ipam_dir, cni_data_dir)
    add = call("ADD", conf, "/run/netns/h4-does-not-exist")
    assert add.returncode == 1
    assert add.json["msg"] == (
        'failed to open netns "/run/netns/h4-does-not-exist": '
        'failed to Statfs "/run/netns/h4-does-not-exist": no such file or directory'
    )
    assert_vf_home(vf)
    assert leases(ipam_dir, vf.rail) == []


def test_failed_ipam_rolls_back_the_vf(call, fake_node, netns, tmp_path, cni_data_dir):
    ns = netns()
    vf = fake_node.vfs[0]
    conf = sriov_conf(vf, tmp_path / "ipam", cni_data_dir)
    conf["ipam"]["subnet"] = "192.0.2.5/24"  # host bits set: host-local refuses it
    add = call("ADD", conf, ns)
    assert add.returncode == 1
    assert add.json["msg"].startswith(
        f'failed to set up IPAM plugin type "host-local" from the device "{vf.pf}"'
    )
    assert_nothing_left(ns, tmp_path / "ipam", cni_data_dir, vf, vf.rail)


def test_del_after_netns_is_gone_still_releases_ipam(call, fake_node, netns, tmp_path, cni_data_dir):
    ns, ipam_dir = netns(), tmp_path / "ipam"
    vf = fake_node.vfs[0]
    conf = sriov_conf(vf, ipam_dir, cni_data_dir)
    assert call("ADD", conf, ns).returncode == 0
    subprocess.run(["ip", "netns", "del", ns_name(ns)], check=True)
    delete = call("DEL", conf, ns)
    assert delete.returncode == 0, delete.stdout
    assert leases(ipam_dir, vf.rail) == []
    assert not (cni_data_dir / "c1-net1").exists()


def test_cnitool_runs_sriov_chained_with_tuning(
    cnitool, cni_bin_dir, fake_node, netns, tmp_path, cni_data_dir
):
    ns, ipam_dir, net_dir = netns(), tmp_path / "ipam", tmp_path / "net.d"
    net_dir.mkdir()
    vf = fake_node.rail_vfs("rail-b")[2]
    sriov = sriov_conf(vf, ipam_dir, cni_data_dir)
    del sriov["cniVersion"], sriov["name"]
    conflist = {"cniVersion": "1.0.0", "name": "rail-b", "plugins": [sriov, {"type": "tuning", "mtu": 1400}]}
    (net_dir / "10-rail-b.conflist").write_text(json.dumps(conflist))
    env = fake_node.env() | {"CNI_IFNAME": "net7"}
    add = run_cnitool(cnitool, ["add", "rail-b", ns], net_dir=net_dir, bin_dir=cni_bin_dir, env=env)
    assert add.returncode == 0, add.stdout + add.stderr
    inside = ns_links(ns)["net7"]
    assert inside["mtu"] == 1400
    assert ipaddress.ip_interface(ipv4_addresses(inside)[0]).network == ipaddress.ip_network(vf.subnet)
    delete = run_cnitool(cnitool, ["del", "rail-b", ns], net_dir=net_dir, bin_dir=cni_bin_dir, env=env)
    assert delete.returncode == 0, delete.stdout + delete.stderr
    assert_vf_home(vf)
    assert leases(ipam_dir, "rail-b") == []


def test_concurrent_adds_of_one_vf_admit_exactly_one(cni_bin_dir, fake_node, netns, tmp_path, cni_data_dir):
    first, second, ipam_dir = netns(), netns(), tmp_path / "ipam"
    vf = fake_node.vfs[4]
    conf = json.dumps(sriov_conf(vf, ipam_dir, cni_data_dir)).encode()
    procs = [
        subprocess.Popen(
            [str(cni_bin_dir / "sriov")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={
                **os.environ,
                **fake_node.env(),
                "CNI_COMMAND": "ADD",
                "CNI_CONTAINERID": cid,
                "CNI_NETNS": ns,
                "CNI_IFNAME": "net1",
                "CNI_PATH": str(cni_bin_dir),
            },
        )
        for cid, ns in (("c1", first), ("c2", second))
    ]
    outs = [json.loads(p.communicate(conf, timeout=60)[0]) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], outs
    loser = next(o for o in outs if "code" in o)
    assert loser["msg"] == f"pci address {vf.pci} is already allocated"
    assert len(leases(ipam_dir, vf.rail)) == 1
    winner_ns = first if procs[0].returncode == 0 else second
    assert "net1" in ns_links(winner_ns)
    assert list(ns_links(second if winner_ns == first else first)) == ["lo"]


def test_failure_after_ipam_releases_the_lease_and_the_vf(call, fake_node, netns, tmp_path, cni_data_dir):
    ns, ipam_dir = netns(), tmp_path / "ipam"
    vf = fake_node.vfs[0]
    conf = sriov_conf(vf, ipam_dir, cni_data_dir)
    # The gateway is off-link, so installing the route fails after host-local has leased an address.
    conf["ipam"]["routes"] = [{"dst": "10.200.0.0/16", "gw": "10.99.0.1"}]
    add = call("ADD", conf, ns)
    assert add.returncode == 1
    assert add.json["code"] == 999 and "failed to add route" in add.json["msg"]
    assert_nothing_left(ns, ipam_dir, cni_data_dir, vf, vf.rail)
