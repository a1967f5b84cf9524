"""A mixed node on the real kubelet (issue #33, spec 10.1 and 18.1): the legacy device-plugin
resourceName path beside the managed DRA path.

The bed's device plugin (testbed/device_plugin.py) registers with the real kubelet and advertises
each PF's last VF as ``openshift.io/legacy_vfs``; the driver's policy leaves those VFs out (one
provider per VF). A legacy Pod (a limit of that resource, a NAD carrying its resourceName, a
networks annotation written by hand) runs beside spec 14.2's managed Pod: cni-shim-daemon asks the
kubelet's pod-resources API which VF the legacy Pod got, hands it to sriov-cni as deviceID and
publishes the device plugin's device-info. Deleting both leaves nothing behind.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed import realnode
from testbed.checks import check_addresses, teardown_checks, vfs_not_home
from testbed.device_plugin import LEGACY_RESOURCE, LegacyVfPlugin
from testbed.netlinks import ipv4_addresses, ns_links
from testbed.results import PASS, render_checks
from testbed.scenario import applied, start_pod, stop_pod
from testbed.stack import Stack, Stacks
from testbed.waiting import wait_for
from testbed.workloads import excluding, legacy_objects, legacy_pool, pairs_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]

LEGACY_SUBNET = "10.77.0.0/24"
CNI_DEVINFO = Path("/var/run/k8s.cni.cncf.io/devinfo/cni")


def _allocatable(stack: Stack) -> str:
    node = client.CoreV1Api(stack.cluster.api).read_node(stack.node_name)
    allocatable = node.status.allocatable if node.status is not None else None
    return str((allocatable or {}).get(LEGACY_RESOURCE, "0"))


@pytest.mark.parametrize("mode", ["thick", "thin"])
def test_a_legacy_pod_and_a_managed_pod_share_a_node(stacks: Stacks, real_kubelet: None, mode: str) -> None:
    """Thick: the daemon asks the kubelet's pod-resources API; thin: the stdlib-only shim reads the
    kubelet's device-plugin checkpoint."""
    stack = stacks.get(thick=mode == "thick")
    pool = legacy_pool(stack.fake_node)
    pool_pcis = [vf.pci for vf in pool]
    plugin = LegacyVfPlugin(realnode.DEVICE_PLUGINS_DIR, pool)
    plugin.start()
    try:
        wait_for(
            lambda: _allocatable(stack) == str(len(pool)), 60, what=f"the Node to offer {LEGACY_RESOURCE}"
        )
        pairs = excluding(
            pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam()), stack.fake_node, pool_pcis
        )
        data_dir = stack.run / "legacy-ipam"
        nad, legacy_pod = legacy_objects(pairs, LEGACY_RESOURCE, LEGACY_SUBNET, str(data_dir))
        with applied(stack, pairs) as sources:
            stack.cluster.apply([nad])
            try:
                managed = start_pod(stack, pairs, pairs.pod, sources)
                legacy = start_pod(stack, pairs, legacy_pod, sources)
                obs = managed.observe()
                assert check_addresses(stack, obs).status == PASS, check_addresses(stack, obs)
                assert {r.vf_pci for r in obs.rows}.isdisjoint(pool_pcis), obs.rows

                (ids,) = plugin.allocated
                (vf,) = ids
                assert vf in pool_pcis
                pod = stack.cluster.read_pod(legacy.pod["metadata"]["namespace"], "legacy") or {}
                status = json.loads(pod["metadata"]["annotations"][keys.NETWORK_STATUS_ANNOTATION])
                (entry,) = [e for e in status if e["name"] == f"{pairs.namespace}/legacy-net"]
                assert entry["interface"] == "net1"
                (ip,) = entry["ips"]
                assert ipaddress.ip_address(ip) in ipaddress.ip_network(LEGACY_SUBNET)
                assert entry["device-info"] == {"type": "pci", "version": "1.1.0", "pci": {"pci-address": vf}}
                links = ns_links(stack.kubelet.netns_path(str(legacy.pod["metadata"]["uid"])))
                assert f"{ip}/24" in ipv4_addresses(links["net1"]), links
                # The VF the kubelet gave the Pod, and no other legacy VF, left the host for a Pod.
                away = vfs_not_home(stack.fake_node)
                assert [a for a in away if any(p in a for p in pool_pcis)] == [
                    f"{v.netdev} ({v.pci})" for v in pool if v.pci == vf
                ], away
                copied = sorted(p.name for p in CNI_DEVINFO.glob(f"{pairs.namespace}-legacy-net-*_net1"))
                assert len(copied) == 1, copied
            finally:
                refs = stop_pod(stack, legacy_pod) + stop_pod(stack, pairs.pod)
                stack.cluster.delete([nad])
        after = teardown_checks(stack, pairs, refs)
        assert all(c.status == PASS for c in after), render_checks(after)
        assert not list(CNI_DEVINFO.glob(f"{pairs.namespace}-legacy-net-*")), (
            "the copied device-info is removed"
        )
        leases = [p.name for p in data_dir.rglob("*") if p.is_file() and p.name[0].isdigit()]
        assert leases == [], leases
    finally:
        plugin.stop()
