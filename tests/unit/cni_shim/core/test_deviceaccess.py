"""Which devices a delegate would receive, and the pure decision over the node's answers."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cni_shim.core import deviceaccess, network
from cni_shim.core.deviceaccess import HWADDR, KERNELPATH, NETDEV, PCI, DeviceRef

VF = "0000:3b:02.1"


def _refs(config, caps=None, cni_args=()):
    net = network.parse(json.dumps(config).encode(), "test")
    return [(r.kind, r.value, r.where) for r in deviceaccess.references(net, caps or {}, cni_args)]


def test_an_ordinary_network_names_no_device():
    assert _refs({"cniVersion": "1.0.0", "name": "n", "type": "macvlan", "master": "eth0"}) == []


def test_pci_keys_are_found_at_any_depth_in_any_case_and_in_lists():
    config = {
        "name": "n",
        "plugins": [
            {"type": "sriov", "deviceid": VF, "args": {"cni": {"PCIBUSID": ["0000:3b:02.2", 7]}}},
            {"type": "tuning", "runtimeConfig": {"deviceID": "0000:3b:02.3"}, "deviceID": {"not": "a name"}},
        ],
    }
    assert _refs(config) == [
        (PCI, VF, "plugins[0].deviceid"),
        (PCI, "0000:3b:02.2", "plugins[0].args.cni.PCIBUSID"),
        (PCI, "0000:3b:02.3", "plugins[1].runtimeConfig.deviceID"),
    ]


def test_host_device_names_its_device_four_ways_other_plugins_do_not():
    config = {
        "type": "host-device",
        "device": "ens1v0",
        "HWADDR": "02:00:00:00:00:01",
        "kernelpath": "/sys/x",
    }
    assert _refs(config) == [
        (NETDEV, "ens1v0", "device"),
        (HWADDR, "02:00:00:00:00:01", "HWADDR"),
        (KERNELPATH, "/sys/x", "kernelpath"),
    ]
    assert _refs({"type": "macvlan", "device": "ens1v0"}) == []


def test_runtime_capability_args_and_cni_args_are_names_too():
    refs = _refs({"type": "sriov"}, {"deviceID": VF, "mac": "x"}, [("K8S_POD_NAME", "p"), ("DeviceID", VF)])
    assert refs == [(PCI, VF, "runtimeConfig.deviceID"), (PCI, VF, "CNI_ARGS DeviceID")]


def test_a_config_nested_past_the_limit_is_not_walked_forever():
    deep: dict[str, object] = {"deviceID": VF}
    for _ in range(40):
        deep = {"x": deep}
    assert _refs({"type": "sriov", "nest": deep}) == []


def test_the_refusal_is_a_config_error_with_its_reason_and_says_where():
    err = deviceaccess.refusal(
        "Multus: [a/b/c]: ", "a/n", DeviceRef(PCI, VF, "runtimeConfig.deviceID"), VF, "a/b/c"
    )
    assert (err.reason, err.code) == ("VirtualFunctionNotAllocated", 7)
    assert f"(runtimeConfig.deviceID {VF})" in err.message
    assert err.message.startswith("Multus: [a/b/c]: error loading k8s delegates k8s args: network a/n: ")


PCIS = st.sampled_from([f"0000:3b:02.{i}" for i in range(6)])


@given(
    resolved=st.lists(st.tuples(PCIS, st.one_of(st.none(), PCIS)), max_size=6),
    bound=st.one_of(st.just(""), PCIS),
    allocated=st.frozensets(PCIS),
)
def test_a_delegate_passes_exactly_when_every_vf_it_names_is_bound_or_allocated(resolved, bound, allocated):
    refs = [(DeviceRef(PCI, name, "deviceID"), vf) for name, vf in resolved]
    refused = deviceaccess.first_unallocated(deviceaccess.unbound(refs, bound), allocated)
    given_to_pod = allocated | {bound}
    if all(vf is None or vf in given_to_pod for _, vf in resolved):
        assert refused is None
    else:
        assert refused is not None
        assert refused[1] not in given_to_pod
        assert refused == next((r, vf) for r, vf in refs if vf is not None and vf not in given_to_pod)
