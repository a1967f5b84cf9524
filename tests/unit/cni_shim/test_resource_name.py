"""The device-plugin resourceName path through the real ADD and DEL (issue #33): Multus's device
lookup, deviceID/pciBusID injection, the device-info copy and network-status device-info."""

from __future__ import annotations

import json

import pytest

from cni_shim import reasons
from cni_shim.errors import TRY_AGAIN_LATER, CniError
from sriov_contract import keys

NS = "ns1"
UID = "uid-1"
ARGS = f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={UID}"
RES = "openshift.io/legacy_vfs"
VF_A, VF_B = "0000:03:00.1", "0000:03:00.2"
DEVINFO = '{"type":"pci","version":"1.1.0","pci":{"pci-address":"%s","extra":"x"},"unknown":1}'


def _nad(shim, name, config, resource=RES):
    shim.kube.add_nad(NS, name, config)
    if resource is not None:
        shim.kube.nads[(NS, name)]["metadata"]["annotations"] = {keys.RESOURCE_NAME_ANNOTATION: resource}


def _sriov(name):
    return {"cniVersion": "1.0.0", "name": name, "type": "sriov", "capabilities": {"CNIDeviceInfoFile": True}}


def _pod(shim, networks):
    shim.kube.add_pod(NS, "pod1", UID, {keys.NETWORKS_ANNOTATION: networks})


def _add(shim):
    return shim.run("ADD", shim.conf(), args=ARGS)


def _stdins(shim):
    return [c.stdin for c in shim.executor.calls if c.stdin.get("type") == "sriov"]


def test_each_network_gets_the_next_sorted_device_of_its_resource(shim):
    _pod(shim, "a,b,c")
    _nad(shim, "a", _sriov("a"))
    _nad(shim, "b", {"cniVersion": "1.0.0", "name": "b", "plugins": [{"type": "sriov"}, {"type": "tuning"}]})
    _nad(shim, "c", _sriov("c"))
    shim.pod_resources.pods[(NS, "pod1")] = [(RES, [VF_B]), ("other/res", ["x"]), (RES, [VF_A])]
    out = _add(shim)
    assert out.status == 0, out.stdout
    assert shim.pod_resources.asked == [(NS, "pod1", UID)]  # one read per ADD
    first, second = _stdins(shim)[:2]
    assert (first["deviceID"], first["pciBusID"]) == (VF_A, VF_A)
    assert first["runtimeConfig"] == {
        "CNIDeviceInfoFile": f"/var/run/k8s.cni.cncf.io/devinfo/cni/{NS}-a-c1_net1"
    }
    # A conflist gets the device in every plugin.
    conflist = [c.stdin for c in shim.executor.calls if c.stdin.get("name") == "b"]
    assert {(p["deviceID"], p["pciBusID"]) for p in conflist} == {(VF_B, VF_B)}
    assert second["name"] == "b"
    # No device left for the third: it runs as configured, silently (Multus).
    third = next(c.stdin for c in shim.executor.calls if c.stdin.get("name") == "c")
    assert "deviceID" not in third and "runtimeConfig" not in third


def test_the_device_plugins_device_info_is_copied_and_published(shim):
    _pod(shim, "a")
    _nad(shim, "a", _sriov("a"))
    shim.pod_resources.pods[(NS, "pod1")] = [(RES, [VF_A])]
    source = f"/var/run/k8s.cni.cncf.io/devinfo/dp/openshift.io-legacy_vfs-{VF_A}-device.json"
    shim.device_info_files[source] = (DEVINFO % VF_A).encode()
    assert _add(shim).status == 0
    target = f"/var/run/k8s.cni.cncf.io/devinfo/cni/{NS}-a-c1_net1"
    assert json.loads(shim.device_info_files[target]) == {
        "type": "pci",
        "version": "1.1.0",
        "pci": {"pci-address": VF_A},
    }
    status = json.loads(
        shim.kube.status_writes[-1]["metadata"]["annotations"][keys.NETWORK_STATUS_ANNOTATION]
    )
    entry = status[1]
    assert entry["name"] == f"{NS}/a"
    assert list(entry)[-1] == "device-info"
    assert entry["device-info"] == {"type": "pci", "version": "1.1.0", "pci": {"pci-address": VF_A}}
    shim.run("DEL", shim.conf(), args=ARGS)
    assert target not in shim.device_info_files
    assert source in shim.device_info_files  # the device plugin's own file stays


def test_an_add_without_a_resource_name_nad_asks_the_kubelet_nothing(shim):
    _pod(shim, "plain")
    _nad(shim, "plain", _sriov("plain"), resource=None)
    assert _add(shim).status == 0
    assert shim.pod_resources.asked == []


def test_an_empty_resource_name_still_enters_the_lookup(shim):
    _pod(shim, "a")
    _nad(shim, "a", _sriov("a"), resource="")
    assert _add(shim).status == 0
    assert shim.pod_resources.asked == [(NS, "pod1", UID)]
    assert "deviceID" not in _stdins(shim)[0]


def test_a_failed_kubelet_read_fails_the_add_in_multus_words(shim):
    _pod(shim, "a")
    _nad(shim, "a", _sriov("a"))
    shim.pod_resources.failure = CniError(
        reasons.POD_RESOURCES_UNAVAILABLE, "getKubeletClient: boom", TRY_AGAIN_LATER
    )
    out = _add(shim)
    assert out.status == 1
    assert out.json["details"] == "PodResourcesUnavailable"
    assert out.json["msg"] == (
        f"Multus: [{NS}/pod1/{UID}]: error loading k8s delegates k8s args: TryLoadPodDelegates: error in "
        "getting k8s network for pod: GetNetworkDelegates: failed getting the delegate: "
        "getKubernetesDelegate: failed to get a ResourceClient instance: getKubeletClient: boom"
    )
    assert shim.executor.calls == []
    assert shim.plan_doc() is None


def test_the_device_gate_accepts_the_device_the_kubelet_gave(shim):
    from tests.fakes.cni_ports import FakeNodeDevices  # noqa: PLC0415

    shim.devices = FakeNodeDevices()
    shim.devices.add_vf(VF_A)
    _pod(shim, "a")
    _nad(shim, "a", _sriov("a"))
    shim.pod_resources.pods[(NS, "pod1")] = [(RES, [VF_A])]
    out = _add(shim)
    assert out.status == 0, out.stdout
    assert _stdins(shim)[0]["deviceID"] == VF_A


@pytest.mark.parametrize("selection_device", ["0000:09:00.1"])
def test_the_lookups_device_wins_over_the_selections(shim, selection_device):
    _pod(shim, json.dumps([{"name": "a", "deviceID": selection_device}]))
    _nad(shim, "a", _sriov("a") | {"capabilities": {"deviceID": True}})
    shim.pod_resources.pods[(NS, "pod1")] = [(RES, [VF_A])]
    assert _add(shim).status == 0
    assert _stdins(shim)[0]["runtimeConfig"] == {"deviceID": VF_A}
