import pytest

from plugins.sriov.config import (
    DEFAULT_DATA_DIR,
    ConfError,
    check_cni_args,
    effective_mac,
    parse_netconf,
)
from plugins.sriov.sysfs import resolve_vf
from testbed.fakenode import load_two_rail
from testbed.fakesysfs import FakeSysfs
from testbed.sriov_topology import parse_topology, plan_node

BASE = {"cniVersion": "1.0.0", "name": "n", "type": "sriov", "deviceID": "0000:17:00.2"}


@pytest.mark.parametrize(
    ("extra", "msg"),
    [
        ({"deviceID": ""}, "VF pci addr is required"),
        ({"vlan": 4095}, "vlan id 4095 invalid: value must be in the range 0-4094"),
        ({"vlan": 5, "vlanQoS": 8}, "vlan QoS PCP 8 invalid: value must be in the range 0-7"),
        (
            {"vlan": 0, "vlanQoS": 3},
            "non-zero vlan id must be configured to set vlan QoS to a non-zero value",
        ),
        ({"link_state": "up"}, "invalid link_state value: up"),
        ({"max_tx_rate": -1}, "max_tx_rate -1 invalid"),
    ],
)
def test_invalid_netconf(extra, msg):
    with pytest.raises(ConfError, match=msg):
        parse_netconf(BASE | extra, {})


def test_defaults_and_data_dir_precedence():
    conf = parse_netconf(BASE | {"mac": "02:AA:00:00:00:01"}, {})
    assert (conf.data_dir, conf.log_level, conf.mac) == (DEFAULT_DATA_DIR, "info", "02:aa:00:00:00:01")
    assert parse_netconf(BASE, {"SRIOV_CNI_DATA_DIR": "/e"}).data_dir == "/e"
    assert parse_netconf(BASE | {"dataDir": "/c"}, {"SRIOV_CNI_DATA_DIR": "/e"}).data_dir == "/c"


def test_mac_precedence_config_then_args_then_runtime_config():
    conf = parse_netconf(BASE | {"mac": "02:00:00:00:00:01"}, {})
    assert effective_mac(conf, {}) == "02:00:00:00:00:01"
    assert effective_mac(conf, {"MAC": "02:00:00:00:00:02"}) == "02:00:00:00:00:02"
    rc = parse_netconf(BASE | {"mac": "02:00:00:00:00:01", "runtimeConfig": {"mac": "02:00:00:00:00:03"}}, {})
    assert effective_mac(rc, {"MAC": "02:00:00:00:00:02"}) == "02:00:00:00:00:03"


def test_unknown_cni_args_need_ignore_unknown():
    with pytest.raises(ConfError, match=r"ARGS: unknown args \['K8S_POD_NAME'\]"):
        check_cni_args({"K8S_POD_NAME": "p"})
    check_cni_args({"K8S_POD_NAME": "p", "IgnoreUnknown": "true"})


@pytest.fixture
def tree(tmp_path):
    plan = plan_node(parse_topology(load_two_rail()), "fab1")
    sysfs = FakeSysfs(tmp_path, plan)
    sysfs.create()
    return tmp_path, plan, sysfs


def test_resolve_vf_through_sysfs(tree):
    root, plan, _ = tree
    vf = plan.vfs[5]
    info = resolve_vf(str(root), vf.pci)
    assert (info.pf, info.vf_index, info.netdev, info.dpdk) == (vf.pf, vf.vf_index, vf.netdev, False)


def test_resolve_unknown_device_reports_the_lstat_path(tree):
    root, _, _ = tree
    with pytest.raises(ConfError) as info:
        resolve_vf(str(root), "0000:af:06.0")
    assert str(info.value) == (
        f'failed to get VF information: "lstat {root}/bus/pci/devices/0000:af:06.0/physfn/net: no such file or directory"'
    )


def test_resolve_vfio_bound_vf_is_dpdk_and_unbound_is_an_error(tree):
    root, plan, sysfs = tree
    vf = plan.vfs[0]
    sysfs.bind(vf.pci, "vfio-pci", vf.netdev)
    assert resolve_vf(str(root), vf.pci).dpdk
    sysfs.bind(vf.pci, None, vf.netdev)
    with pytest.raises(ConfError, match="does not have a interface name or a dpdk driver"):
        resolve_vf(str(root), vf.pci)
