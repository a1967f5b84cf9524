"""A DEL storm after cache loss (issue #35 item 6): 50 sandboxes, each with a managed shadow on a
VF of its own, lose cniDir and their Pods at once; every DEL succeeds and no VF or address of
the rail is left behind. Real API server, cnitool, thin shim, the sriov test plugin over a fake
node of 50 VFs, real host-local; DELs run 8 at a time, as a runtime tearing sandboxes down does.

Multus issues #1087 and #1446 are such storms wedging the runtime on DELs that cannot succeed.
About 35 s on two busy cores (the 50 DELs about 11 s), so only `make faults` (-m faults) runs it.
"""

from __future__ import annotations

import copy
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.cluster import NAD_API
from testbed.cni_objects import bind_by_hand, create_pod
from testbed.fakenode import FakeNode, load_two_rail
from testbed.managed_shadows import rendered_sriov_config
from testbed.netlinks import host_link
from tests.support.cni import assert_vf_home, host_local_allocations
from tests.support.cni_daemon import shim_bin_dir
from tests.support.thin_node import ThinNode

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.faults]

SANDBOXES = 50
PARALLEL = 8


@pytest.fixture
def wide_node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FakeNode]:
    """The two-rail node with rail-a grown to SANDBOXES VFs (only built for a `make faults` run)."""
    if "faults" not in (request.config.getoption("markexpr", "") or ""):
        pytest.skip("about 35 s: runs under `make faults` (-m faults)")
    topology = copy.deepcopy(load_two_rail())
    pf = topology["roots"][0]["pfs"][0]
    pf["vfs"] = pf["totalVfs"] = SANDBOXES
    node = FakeNode.up(topology, tmp_path / "sys")
    try:
        yield node
    finally:
        node.down()


@pytest.fixture
def storm_node(tmp_path, cni_bin_dir, cnitool, wide_node, thin_kubeconfig) -> ThinNode:
    bin_dir = shim_bin_dir(tmp_path / "bin", cni_bin_dir, "cni-shim", recorder_as_sriov=False)
    return ThinNode(tmp_path, bin_dir, cnitool, wide_node, thin_kubeconfig)


def test_a_del_storm_after_cache_loss_succeeds_and_leaks_no_address(
    testbed, k8s_namespace, storm_node, wide_node, netns, tmp_path
):
    api, ns, node = testbed.api_client, k8s_namespace, storm_node
    vfs = wide_node.rail_vfs("rail-a")
    assert len(vfs) == SANDBOXES
    ipam_dir = tmp_path / "rail-ipam"
    sandboxes: list[tuple[dict[str, Any], str, str]] = []
    try:
        for i, vf in enumerate(vfs):
            pod = create_pod(api, ns, f"storm-{i}", testbed.node_name, {})
            ipam = {"type": "host-local", "subnet": vf.subnet, "dataDir": str(ipam_dir)}
            config = rendered_sriov_config(vf.pci, dataDir=str(node.tmp / "sriov-data"), ipam=ipam)
            shadow, _ = bind_by_hand(api, pod, testbed.node_name, config, pci=vf.pci, seed=f"storm-{i}")
            sandboxes.append((pod, shadow["name"], netns()))

        with ThreadPoolExecutor(PARALLEL) as pool:
            adds = list(pool.map(lambda s: node.run("add", s[2], s[0]), sandboxes))
        assert [a.returncode for a in adds] == [0] * SANDBOXES, next(a.stderr for a in adds if a.returncode)
        assert len(host_local_allocations(ipam_dir, "rail-a")) == SANDBOXES
        assert all(host_link(vf.netdev) is None for vf in vfs)

        shutil.rmtree(node.cache)
        core = client.CoreV1Api(api)
        for pod, _, _ in sandboxes:
            core.delete_namespaced_pod(pod["metadata"]["name"], ns, grace_period_seconds=0)
        started = time.monotonic()
        with ThreadPoolExecutor(PARALLEL) as pool:
            dels = list(pool.map(lambda s: node.run("del", s[2], s[0]), sandboxes))
        took = time.monotonic() - started
        assert [d.returncode for d in dels] == [0] * SANDBOXES, next(d.stderr for d in dels if d.returncode)
        assert host_local_allocations(ipam_dir, "rail-a") == {}, "addresses leaked"
        assert host_local_allocations(node.tmp / "ipam", "podnet") == {}, "cluster network leases leaked"
        for vf in vfs:
            assert_vf_home(vf)
        print(f"{SANDBOXES} DELs after cache loss, {PARALLEL} at a time: {took:.1f} s")
    finally:
        objs = client.CustomObjectsApi(api)
        for _, name, _ in sandboxes:
            objs.patch_namespaced_custom_object(
                *NAD_API[:2], ns, NAD_API[2], name, {"metadata": {"finalizers": None}}
            )
