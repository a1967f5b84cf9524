"""No VF without an allocation, through the real ADD and DEL paths with fake node devices (issue #31)."""

from __future__ import annotations

import json

import pytest

from sriov_contract import keys
from testbed.managed_shadows import POD_UID, managed_shadow, registry_annotation
from tests.fakes.cni_ports import FakeNodeDevices

NS = "ns1"
FREE_VF = "0000:03:00.2"
PF = "0000:03:00.0"
ARGS = f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}"


def _sriov(name: str, pci: str, **extra):
    return {"cniVersion": "1.0.0", "name": name, "type": "sriov", "deviceID": pci, **extra}


@pytest.fixture
def node(shim):
    shim.devices = FakeNodeDevices()
    shim.devices.add_vf("0000:03:00.1", "ens1v0")
    shim.devices.add_vf(FREE_VF, "ens1v1")
    return shim.devices


def _pod(shim, networks, annotations=None):
    shim.kube.add_pod(NS, "pod1", POD_UID, {keys.NETWORKS_ANNOTATION: networks, **(annotations or {})})


def _run(shim, command="ADD", conf=None):
    return shim.run(command, conf or shim.conf(), args=ARGS)


def test_a_tenant_nad_naming_a_free_vf_is_refused_before_any_delegate(shim, node):
    _pod(shim, "steal")
    shim.kube.add_nad(NS, "steal", _sriov("steal", FREE_VF))
    out = _run(shim)
    assert out.status == 1
    assert out.json["code"] == 7
    assert out.json["details"] == "VirtualFunctionNotAllocated"
    assert out.json["msg"] == (
        f"Multus: [{NS}/pod1/{POD_UID}]: error loading k8s delegates k8s args: network {NS}/steal: "
        f"SR-IOV virtual function {FREE_VF} (deviceID {FREE_VF} in its config) is not allocated to pod "
        f"{NS}/pod1/{POD_UID}; refused before any delegate ran"
    )
    assert shim.executor.calls == []
    assert shim.plan_doc() is None


@pytest.mark.parametrize(
    ("config", "selection", "where"),
    [
        ({"type": "sriov", "DeviceId": FREE_VF}, {}, "DeviceId"),  # Go decodes keys case-insensitively
        ({"type": "sriov", "args": {"cni": {"deviceID": FREE_VF}}}, {}, "args.cni.deviceID"),
        ({"plugins": [{"type": "tuning"}, {"type": "x", "pciBusID": FREE_VF}]}, {}, "plugins[1].pciBusID"),
        ({"type": "host-device", "device": "ens1v1"}, {}, "device"),
        ({"type": "sriov"}, {"deviceID": FREE_VF}, "runtimeConfig.deviceID"),
        ({"type": "sriov"}, {"cni-args": {"deviceID": FREE_VF}}, "args.cni.deviceID"),
    ],
)
def test_every_way_of_naming_a_vf_is_seen(shim, node, config, selection, where):
    _pod(shim, json.dumps([{"name": "steal", **selection}]))
    shim.kube.add_nad(NS, "steal", {"cniVersion": "1.0.0", "name": "steal", **config})
    out = _run(shim)
    assert out.json["details"] == "VirtualFunctionNotAllocated", out.stdout
    assert f"({where} " in out.json["msg"]
    assert shim.executor.calls == []


def test_ordinary_networks_run_unchanged_and_ask_the_node_nothing(shim, node):
    _pod(shim, "plain")
    shim.kube.add_nad(NS, "plain", {"cniVersion": "1.0.0", "name": "plain", "type": "macvlan"})
    assert _run(shim).status == 0
    assert node.asked == []


def test_a_device_that_is_no_vf_is_left_alone(shim, node):
    _pod(shim, "pf")
    shim.kube.add_nad(NS, "pf", _sriov("pf", PF))
    assert _run(shim).status == 0
    assert node.asked == [("pci", PF)]
    assert shim.executor.commands()[-1] == ("sriov", "ADD", "net1")


def test_the_administrators_namespaces_may_name_vfs(shim, node):
    _pod(shim, "static")
    shim.kube.add_nad(NS, "static", _sriov("static", FREE_VF))
    out = _run(shim, conf=shim.conf(staticDeviceNamespaces=["other", NS]))
    assert out.status == 0, out.stdout
    assert node.asked == []
    assert shim.executor.calls[-1].stdin["deviceID"] == FREE_VF


def test_the_device_plugin_allocation_for_the_nads_resource_is_honoured(shim, node):
    _pod(shim, "legacy")
    nad = _sriov("legacy", FREE_VF)
    shim.kube.add_nad(NS, "legacy", nad)
    shim.kube.nads[(NS, "legacy")]["metadata"]["annotations"] = {
        keys.RESOURCE_NAME_ANNOTATION: "vendor.com/vf"
    }
    assert _run(shim).json["details"] == "VirtualFunctionNotAllocated"
    node.allocations[("another-pod", "vendor.com/vf")] = frozenset({FREE_VF})
    node.allocations[(POD_UID, "vendor.com/other")] = frozenset({FREE_VF})
    assert _run(shim).json["details"] == "VirtualFunctionNotAllocated"
    node.allocations[(POD_UID, "vendor.com/vf")] = frozenset({FREE_VF})
    assert _run(shim).status == 0


def _shadow_pod(shim, shadow, extra=None):
    selections = [shadow["selection"], *(extra or [])]
    shim.kube.add_pod(
        NS,
        "pod1",
        POD_UID,
        {
            keys.NETWORKS_ANNOTATION: json.dumps(selections),
            keys.REGISTRY_ANNOTATION: registry_annotation(POD_UID, [shadow["entry"]]),
        },
    )
    shim.kube.nads[(NS, shadow["name"])] = shadow["nad"]


def test_the_managed_shadow_bound_to_this_pod_gives_its_vf_and_no_other(shim, node):
    shadow = managed_shadow(namespace=NS, pod_name="pod1")
    _shadow_pod(shim, shadow)
    out = _run(shim)
    assert out.status == 0, out.stdout
    assert node.asked == [("pci", "0000:03:00.1")]
    # The same Pod cannot add a second VF beside its shadow's.
    shim.kube.add_nad(NS, "steal", _sriov("steal", FREE_VF))
    _shadow_pod(shim, shadow, [{"name": "steal"}])
    assert _run(shim).json["details"] == "VirtualFunctionNotAllocated"


def test_a_del_without_cache_after_a_refused_add_runs_no_delegate_on_the_vf(shim, node):
    _pod(shim, "steal")
    shim.kube.add_nad(NS, "steal", _sriov("steal", FREE_VF))
    assert _run(shim).status == 1
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [("ptp", "DEL", "eth0")]
    assert any(
        level == "warning"
        and "not deleting network ns1/steal" in msg
        and "VirtualFunctionNotAllocated" in msg
        for level, msg in shim.log.lines
    )


OTHER_UID = "99999999-2222-3333-4444-555555555555"


def test_a_del_without_cache_never_runs_another_pods_shadow(shim, node):
    theirs = managed_shadow(namespace=NS, pod_name="pod2", pod_uid=OTHER_UID)
    shim.kube.add_pod(NS, "pod1", POD_UID, {keys.NETWORKS_ANNOTATION: json.dumps([theirs["selection"]])})
    shim.kube.nads[(NS, theirs["name"])] = theirs["nad"]
    assert _run(shim).json["details"] == "ManagedShadowPodMismatch"
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [("ptp", "DEL", "eth0")]
    assert any("ManagedShadowPodMismatch" in msg for level, msg in shim.log.lines if level == "warning")


def test_a_del_without_cache_still_tears_down_this_pods_own_terminating_shadow(shim, node):
    shadow = managed_shadow(namespace=NS, pod_name="pod1")
    shadow["nad"]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    _shadow_pod(shim, shadow)
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [("sriov", "DEL", "dra0"), ("ptp", "DEL", "eth0")]
