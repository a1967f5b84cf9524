"""DEL after the delegate cache is lost and the Pod is gone: the Pod's managed shadows still give
the sriov delegate, so the VF goes home and IPAM releases the address; nothing fails the DEL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cni_shim.core import shadowrebuild
from cni_shim.errors import CniError
from sriov_contract import keys
from testbed.managed_shadows import POD_UID, managed_shadow, registry_annotation
from tests.fakes.cni_ports import FakeNodeDevices

NS = "ns1"
ARGS = f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}"
SELECTOR = shadowrebuild.selector(POD_UID)


def _run(shim, command: str, args: str = ARGS):
    return shim.run(command, shim.conf(), args=args)


def _attached(shim, *shadows: dict[str, Any]) -> None:
    """ADD of a Pod with `shadows`, then the cache file lost and the Pod deleted (shadows stay)."""
    shim.kube.add_pod(
        NS,
        "pod1",
        POD_UID,
        {
            keys.NETWORKS_ANNOTATION: json.dumps([s["selection"] for s in shadows]),
            keys.REGISTRY_ANNOTATION: registry_annotation(POD_UID, [s["entry"] for s in shadows]),
        },
    )
    for s in shadows:
        shim.kube.nads[(NS, s["name"])] = s["nad"]
    out = _run(shim, "ADD")
    assert out.status == 0, out.stdout
    (shim.cni_dir / "c1").unlink()
    shim.kube.pods.clear()
    shim.executor.calls.clear()
    shim.kube.reads.clear()


@pytest.fixture
def two_shadows(shim) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two attached shadows, dra0 on 0000:03:00.1 and dra1 on 0000:03:00.2."""
    one = managed_shadow(namespace=NS, pod_name="pod1")
    two = managed_shadow(namespace=NS, pod_name="pod1", seed="b", interface="dra1", pci="0000:03:00.2")
    _attached(shim, one, two)
    return one, two


def _errors(shim) -> list[str]:
    return [msg for level, msg in shim.log.lines if level == "error"]


def test_the_shadows_frozen_configs_are_deleted_on_their_interfaces(shim, two_shadows):
    one, _ = two_shadows
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    # The cluster network too, which ADD ran first: only a Pod of ours has shadows.
    assert shim.executor.commands() == [
        ("sriov", "DEL", "dra1"),
        ("static", "DEL", "dra1"),
        ("sriov", "DEL", "dra0"),
        ("static", "DEL", "dra0"),
        ("ptp", "DEL", "eth0"),
    ]
    by_if = {c.ifname: c for c in shim.executor.calls}
    assert by_if["dra0"].stdin["deviceID"] == "0000:03:00.1"
    assert by_if["dra1"].stdin["deviceID"] == "0000:03:00.2"
    assert by_if["dra0"].env["CNI_CONTAINERID"] == "c1"
    assert by_if["dra0"].stdin["ipam"] == json.loads(one["nad"]["spec"]["config"])["ipam"]
    assert shim.kube.reads == [("pod", NS, "pod1"), ("nads", NS, SELECTOR)]
    assert _errors(shim) == []
    assert not any("cannot properly delete" in msg for _, msg in shim.log.lines)


def test_without_a_pod_and_without_shadows_it_is_multus_as_before(shim):
    out = _run(shim, "DEL")
    assert out.status == 0
    assert shim.executor.calls == []
    assert any(level == "warning" and "cannot properly delete" in msg for level, msg in shim.log.lines)


def test_a_replaced_pod_of_the_same_name_does_not_hide_the_old_ones_shadows(shim):
    shadow = managed_shadow(namespace=NS, pod_name="pod1")
    _attached(shim, shadow)
    shim.kube.add_pod(NS, "pod1", "44444444-2222-3333-4444-555555555555")  # a StatefulSet's next Pod
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [
        ("sriov", "DEL", "dra0"),
        ("static", "DEL", "dra0"),
        ("ptp", "DEL", "eth0"),
    ]


def test_a_forged_shadow_is_never_run_and_named_in_the_log(shim):
    real = managed_shadow(namespace=NS, pod_name="pod1")
    _attached(shim, real)
    # Labelled for this Pod, bound to another: a tenant's forgery where no admission policy stops it.
    forged = managed_shadow(
        namespace=NS,
        pod_name="pod2",
        pod_uid="99999999-2222-3333-4444-555555555555",
        seed="f",
        interface="dra5",
    )
    forged["nad"]["metadata"]["labels"][keys.POD_UID_LABEL] = POD_UID
    shim.kube.nads[(NS, forged["name"])] = forged["nad"]
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [
        ("sriov", "DEL", "dra0"),
        ("static", "DEL", "dra0"),
        ("ptp", "DEL", "eth0"),
    ]
    assert any(
        level == "warning"
        and f"not deleting managed shadow {NS}/{forged['name']}: ManagedShadowPodMismatch" in msg
        for level, msg in shim.log.lines
    )


def test_without_the_runtimes_pod_uid_no_shadow_is_looked_for(shim):
    _attached(shim, managed_shadow(namespace=NS, pod_name="pod1"))
    out = _run(shim, "DEL", args=f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1")
    assert out.status == 0
    assert shim.executor.calls == []
    assert ("nads", NS, SELECTOR) not in shim.kube.reads


def test_a_failed_list_is_logged_with_its_reason_and_the_del_succeeds(shim):
    _attached(shim, managed_shadow(namespace=NS, pod_name="pod1"))
    shim.kube.list_errors.append(503)
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert shim.executor.calls == []
    assert any("ShadowTeardownIncomplete" in m and "KubeApiUnavailable" in m for m in _errors(shim))


def test_a_failed_delegate_del_is_logged_and_the_del_still_succeeds(shim, two_shadows):
    shim.executor.failures[("sriov", "DEL")] = CniError("DelegateFailed", "VF busy", 11)
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    # every delegate is tried
    assert shim.executor.commands() == [
        ("sriov", "DEL", "dra1"),
        ("sriov", "DEL", "dra0"),
        ("ptp", "DEL", "eth0"),
    ]
    assert len([m for m in _errors(shim) if "ShadowTeardownIncomplete" in m and "DelegateFailed" in m]) == 2


def test_a_bug_in_the_rebuild_never_fails_the_del(shim, monkeypatch):
    _attached(shim, managed_shadow(namespace=NS, pod_name="pod1"))

    def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(shadowrebuild, "sort", broken)
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert any(
        "ShadowTeardownIncomplete" in m and "InternalError: RuntimeError: boom" in m for m in _errors(shim)
    )


def test_interfaces_two_shadows_share_fail_the_rebuild_not_the_del(shim):
    one = managed_shadow(namespace=NS, pod_name="pod1")
    _attached(shim, one)
    twin = managed_shadow(namespace=NS, pod_name="pod1", seed="b", pci="0000:03:00.2")  # also dra0
    shim.kube.nads[(NS, twin["name"])] = twin["nad"]
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert shim.executor.calls == []
    assert any("ShadowTeardownIncomplete" in m and "InterfaceNameCollision" in m for m in _errors(shim))


@pytest.fixture
def node(shim):
    shim.devices = FakeNodeDevices()
    shim.devices.add_vf("0000:03:00.1", "ens1v0")
    return shim.devices


def test_the_device_gate_lets_the_bound_vf_through(shim, node):
    _attached(shim, managed_shadow(namespace=NS, pod_name="pod1"))
    node.asked.clear()
    out = _run(shim, "DEL")
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [
        ("sriov", "DEL", "dra0"),
        ("static", "DEL", "dra0"),
        ("ptp", "DEL", "eth0"),
    ]
    assert node.asked == [("pci", "0000:03:00.1")]


def test_a_cluster_network_that_no_longer_resolves_leaves_the_shadows_to_tear_down(shim):
    (shim.conf_dir / "10-main.conf").write_text(
        json.dumps({"cniVersion": "1.0.0", "name": "main", "type": "ptp"})
    )
    conf = shim.conf(clusterNetwork="main")
    shadow = managed_shadow(namespace=NS, pod_name="pod1")
    shim.kube.add_pod(
        NS,
        "pod1",
        POD_UID,
        {
            keys.NETWORKS_ANNOTATION: json.dumps([shadow["selection"]]),
            keys.REGISTRY_ANNOTATION: registry_annotation(POD_UID, [shadow["entry"]]),
        },
    )
    shim.kube.nads[(NS, shadow["name"])] = shadow["nad"]
    assert shim.run("ADD", conf, args=ARGS).status == 0
    (shim.cni_dir / "c1").unlink()
    shim.kube.pods.clear()
    shim.executor.calls.clear()
    (shim.conf_dir / "10-main.conf").unlink()
    out = shim.run("DEL", conf, args=ARGS)
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [("sriov", "DEL", "dra0"), ("static", "DEL", "dra0")]
    assert any("ShadowTeardownIncomplete: cannot resolve the cluster network" in m for m in _errors(shim))
