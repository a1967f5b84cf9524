"""A DEL after the delegate cache is lost and the Pod is gone releases the VF and its address
(issue #35 item 6), on the real API server with real network namespaces, cnitool, the sriov test
plugin over the fake node, and the real host-local and whereabouts IPAM plugins.

Between ADD and DEL the whole cniDir is deleted and the Pod force-deleted; the managed shadow,
held by the protection finalizer as the driver holds it until unprepare, is all DEL has left.
Multus (and this shim before) then deleted nothing: the VF stayed in the dying netns and the
reservation leaked.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract import keys
from testbed.apiobjects import as_object
from testbed.cluster import NAD_API
from testbed.cni_objects import bind_by_hand, create_nad, create_pod
from testbed.kubelet_sim import cnitool_container_id
from testbed.managed_shadows import rendered_sriov_config
from testbed.netlinks import host_link, ns_links
from tests.support.cni import Whereabouts, assert_vf_home, host_local_allocations
from tests.support.cni_daemon import pod_args
from tests.support.thin_node import ThinNode

pytestmark = [pytest.mark.integration, pytest.mark.netns]

FORGED = "dra-sriov-" + "f" * 32


@pytest.fixture
def node(thin_node: ThinNode) -> ThinNode:
    return thin_node


def _whereabouts_allocations(testbed: Any, wb: Whereabouts, network: str, cidr: str) -> dict[str, Any]:
    objs = client.CustomObjectsApi(testbed.api_client)
    try:
        pool = objs.get_namespaced_custom_object(
            "whereabouts.cni.cncf.io", "v1alpha1", wb.namespace, "ippools", wb.pool_name(network, cidr)
        )
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
    return dict(as_object(pool)["spec"].get("allocations") or {})


Ipam = tuple[dict[str, Any], Callable[[], list[str]]]


@pytest.fixture(params=["host-local", "whereabouts"])
def ipam(
    request: pytest.FixtureRequest, testbed: Any, fake_node: Any, tmp_path: Path
) -> Callable[[Any], Ipam]:
    """For a VF: the shadow's ipam block and what the IPAM holds for the rail (reserved container IDs)."""

    def make(vf: Any) -> Ipam:
        if request.param == "host-local":
            ipam_dir = tmp_path / "rail-ipam"
            block = {"type": "host-local", "subnet": vf.subnet, "dataDir": str(ipam_dir)}
            return block, lambda: sorted(host_local_allocations(ipam_dir, vf.rail).values())
        wb: Whereabouts = request.getfixturevalue("whereabouts")
        network = f"cl-{secrets.token_hex(3)}-{vf.rail}"
        return wb.ipam(network, vf.subnet), lambda: sorted(
            str(e["id"]) for e in _whereabouts_allocations(testbed, wb, network, vf.subnet).values()
        )

    return make


def _release(api: Any, ns: str, name: str) -> None:
    """What the driver's unprepare does last: drop the protection finalizer."""
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        *NAD_API[:2], ns, NAD_API[2], name, {"metadata": {"finalizers": None}}
    )


def _bound_pod(
    testbed: Any, ns: str, name: str, node: ThinNode, fake_node: Any, ipam: Callable[[Any], Ipam]
) -> tuple[Any, Callable[[], list[str]], dict[str, Any], str, dict[str, Any]]:
    """A Pod bound by hand to the first rail-a VF through a shadow with `ipam`'s block: the VF, what
    the IPAM holds for it, the Pod, the shadow's config and the shadow."""
    vf = fake_node.rail_vfs("rail-a")[0]
    block, reserved = ipam(vf)
    pod = create_pod(testbed.api_client, ns, name, testbed.node_name, {})
    config = rendered_sriov_config(vf.pci, dataDir=str(node.tmp / "sriov-data"), ipam=block)
    shadow, _ = bind_by_hand(testbed.api_client, pod, testbed.node_name, config, pci=vf.pci)
    return vf, reserved, pod, config, shadow


def test_del_after_the_cache_and_the_pod_are_gone_returns_the_vf_and_frees_the_address(
    testbed, k8s_namespace, node, fake_node, netns, ipam
):
    api, ns = testbed.api_client, k8s_namespace
    vf, reserved, pod, _, shadow = _bound_pod(testbed, ns, "lost", node, fake_node, ipam)
    sandbox = netns()
    add = node.run("add", sandbox, pod)
    assert add.returncode == 0, add.stdout + add.stderr
    assert "dra0" in ns_links(sandbox) and host_link(vf.netdev) is None
    assert len(reserved()) == 1
    assert len(host_local_allocations(node.tmp / "ipam", "podnet")) == 1

    shutil.rmtree(node.cache)  # the delegate cache and every cached result
    client.CoreV1Api(api).delete_namespaced_pod("lost", ns, grace_period_seconds=0)
    try:
        rm = node.run("del", sandbox, pod)
        assert rm.returncode == 0, rm.stdout + rm.stderr
        assert reserved() == [], "the shadow's address is still reserved after DEL"
        assert host_local_allocations(node.tmp / "ipam", "podnet") == {}, "the cluster network's lease leaked"
        assert_vf_home(vf)
        assert "tearing down managed shadows" in node.log.read_text()
    finally:
        _release(api, ns, shadow["name"])


def test_an_address_reserved_before_sriov_cni_cached_anything_is_freed_by_del(
    testbed, k8s_namespace, node, fake_node, netns, ipam
):
    """The node lost power inside sriov-cni's ADD, after its IPAM ADD and before its own cache:
    nothing on the node remembers the address but the IPAM itself, and sriov-cni's DEL, finding
    no cache, frees nothing. The shim's own IPAM DEL after every managed delegate's DEL does."""
    api, ns = testbed.api_client, k8s_namespace
    vf, reserved, pod, config, shadow = _bound_pod(testbed, ns, "cut", node, fake_node, ipam)
    sandbox = netns()
    meta = pod["metadata"]
    env = {
        **os.environ,
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": cnitool_container_id(os.path.abspath(sandbox)),
        "CNI_NETNS": sandbox,
        "CNI_IFNAME": "dra0",
        "CNI_PATH": str(node.bin_dir),
        "CNI_ARGS": pod_args(meta["namespace"], meta["name"], meta["uid"]),
    }
    conf = json.loads(config)
    stdin = json.dumps({**conf, "cniVersion": "1.0.0"}).encode()
    cut = subprocess.run(
        [str(node.bin_dir / conf["ipam"]["type"])], input=stdin, env=env, capture_output=True
    )
    assert cut.returncode == 0, cut.stdout + cut.stderr
    assert len(reserved()) == 1

    client.CoreV1Api(api).delete_namespaced_pod("cut", ns, grace_period_seconds=0)
    try:
        rm = node.run("del", sandbox, pod)
        assert rm.returncode == 0, rm.stdout + rm.stderr
        assert reserved() == [], "the address reserved before sriov-cni's cache leaked"
        assert_vf_home(vf)
    finally:
        _release(api, ns, shadow["name"])


def test_a_shadow_forged_for_the_pod_is_not_run(testbed, k8s_namespace, node, fake_node, netns):
    """A NAD carrying the Pod's labels and a binding to another Pod's VF (no admission policy in
    this bed to refuse it) is named in the log and never reaches the sriov plugin."""
    api, ns = testbed.api_client, k8s_namespace
    victim_vf = fake_node.rail_vfs("rail-a")[1]
    victim = create_pod(api, ns, "victim", testbed.node_name, {})
    victim_conf = rendered_sriov_config(victim_vf.pci, dataDir=str(node.tmp / "sriov-data"))
    victim_shadow, _ = bind_by_hand(api, victim, testbed.node_name, victim_conf, pci=victim_vf.pci)
    victim_ns = netns()
    assert node.run("add", victim_ns, victim).returncode == 0
    tenant = create_pod(api, ns, "tenant", testbed.node_name, {})
    sandbox = netns()
    assert node.run("add", sandbox, tenant).returncode == 0
    # The forgery: the victim's shadow, relabelled for the tenant's Pod under a name of its own.
    forged = as_object(
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            *NAD_API[:2], ns, NAD_API[2], victim_shadow["name"]
        )
    )
    meta = {
        "name": FORGED,
        "labels": {**forged["metadata"]["labels"], keys.POD_UID_LABEL: tenant["metadata"]["uid"]},
        "annotations": forged["metadata"]["annotations"],
        "finalizers": forged["metadata"]["finalizers"],  # else the garbage collector takes it with the Pod
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "tenant", "uid": tenant["metadata"]["uid"]}
        ],
    }
    create_nad(api, ns, {"metadata": meta, "spec": forged["spec"]})
    shutil.rmtree(node.cache)
    client.CoreV1Api(api).delete_namespaced_pod("tenant", ns, grace_period_seconds=0)
    try:
        rm = node.run("del", sandbox, tenant)
        assert rm.returncode == 0, rm.stdout + rm.stderr
        assert "dra0" in ns_links(victim_ns), "the forged shadow's DEL took the victim's VF"
        log = node.log.read_text()
        assert f"not deleting managed shadow {ns}/{FORGED}: ManagedShadowPodMismatch" in log
    finally:
        _release(api, ns, victim_shadow["name"])
        _release(api, ns, FORGED)
