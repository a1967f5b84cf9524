"""The sriov test plugin with the real whereabouts IPAM against the real API server."""

import ipaddress
import secrets

import pytest

from testbed.netlinks import ipv4_addresses, ns_links
from tests.support.cni import assert_vf_home, run_cni

pytestmark = [pytest.mark.integration, pytest.mark.netns]


def test_whereabouts_allocation_shows_in_ippool_and_is_gone_after_del(
    testbed, whereabouts, cni_bin_dir, fake_node, netns, cni_data_dir
):
    ns = netns()
    a, b = fake_node.rail_vfs("rail-a")[0], fake_node.rail_vfs("rail-b")[0]
    run_id = secrets.token_hex(3)
    confs = {}
    for vf, ifname in ((a, "net1"), (b, "net2")):
        network = f"h4-{run_id}-{vf.rail}"
        confs[ifname] = (
            network,
            vf,
            {
                "cniVersion": "1.0.0",
                "name": network,
                "type": "sriov",
                "deviceID": vf.pci,
                "dataDir": str(cni_data_dir),
                "ipam": whereabouts.ipam(network, vf.subnet),
            },
        )
    env = fake_node.env()
    cni_args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=h4-pod"

    def call(command, ifname):
        return run_cni(
            "sriov",
            command,
            confs[ifname][2],
            bin_dir=cni_bin_dir,
            container_id="c-wb",
            netns=ns,
            ifname=ifname,
            cni_args=cni_args,
            env=env,
        )

    for ifname in ("net1", "net2"):
        add = call("ADD", ifname)
        assert add.returncode == 0, add.stdout + add.stderr
    links = ns_links(ns)
    for ifname, (network, vf, _) in confs.items():
        (address,) = ipv4_addresses(links[ifname])
        assert ipaddress.ip_interface(address).network == ipaddress.ip_network(vf.subnet)
        entries = whereabouts.allocations(testbed.api_client, network, vf.subnet)
        assert [(e["id"], e["ifname"], e["podref"]) for e in entries.values()] == [
            ("c-wb", ifname, "default/h4-pod")
        ]
        offset = int(ipaddress.ip_interface(address).ip) - int(
            ipaddress.ip_network(vf.subnet).network_address
        )
        assert list(entries) == [str(offset)]

    for ifname in ("net2", "net1"):
        delete = call("DEL", ifname)
        assert delete.returncode == 0, delete.stdout + delete.stderr
    for network, vf, _ in confs.values():
        assert whereabouts.allocations(testbed.api_client, network, vf.subnet) == {}
        assert_vf_home(vf)
    assert list(ns_links(ns)) == ["lo"]
