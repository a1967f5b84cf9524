"""Two real nodes on one machine (``Stack(second_node=True)``): each with its own fake SR-IOV node,
containerd, kubelet, driver and cni-shim-daemon, and its own cluster-network range. What only a
second node can show: whereabouts hands out one rail subnet across both nodes without a duplicate,
host-local leases each node's addresses from its own range, and the orphan scan of one node never
counts the other node's shadows.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import netaddr
import pytest

from testbed.checks import check_addresses, check_shadows, teardown_checks
from testbed.netlinks import ipv4_addresses
from testbed.observation import Observed, observe
from testbed.results import PASS, render_checks
from testbed.scenario import applied, stop_pod
from testbed.stack import SECOND_NODE_POD_SUBNET, Stack
from testbed.workloads import Workload, rails_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]

HOSTNAME_LABEL = "kubernetes.io/hostname"


def _pinned(workload: Workload, name: str, node: str) -> dict[str, Any]:
    pod = copy.deepcopy(workload.pod)
    pod["metadata"]["name"] = name
    pod["spec"]["nodeSelector"] = {**pod["spec"]["nodeSelector"], HOSTNAME_LABEL: node}
    return pod


@contextlib.contextmanager
def pods_on_both_nodes(stack: Stack, per_node: int) -> Iterator[list[Observed]]:
    """``per_node`` rails Pods Running on each node, observed; deleted afterwards, and the teardown
    checks of both nodes must pass."""
    workload = rails_workload(stack)
    pods = [
        _pinned(workload, f"two-nodes-{n}-{i}", node.node_name)
        for n, node in enumerate(stack.nodes)
        for i in range(per_node)
    ]
    with applied(stack, workload):
        refs: list[str] = []
        try:
            for pod in pods:
                stack.cluster.create_pod(pod)
            for pod in pods:
                stack.cluster.wait_running(pod["metadata"]["namespace"], pod["metadata"]["name"])
            yield [observe(stack, pod) for pod in pods]
        finally:
            for pod in pods:
                refs += stop_pod(stack, pod)
        for node in stack.nodes:
            checks = teardown_checks(node, workload, refs)
            assert all(c.status == PASS for c in checks), f"{node.node_name}:\n{render_checks(checks)}"


def _node(obs: Observed) -> str:
    return str(obs.pod["spec"]["nodeName"])


def test_whereabouts_allocates_each_rail_subnet_across_both_nodes_without_duplicates(
    two_node_stack: Stack,
) -> None:
    stack = two_node_stack
    with pods_on_both_nodes(stack, 2) as observed:
        assert {_node(o) for o in observed} == {n.node_name for n in stack.nodes}
        for rail in ("rail-a", "rail-b"):
            rows = [(o, r) for o in observed for r in o.rows if r.rail == rail]
            assert len(rows) == 4, rows
            ips = [netaddr.IPNetwork(r.ip).ip for _, r in rows]
            assert len(set(ips)) == 4, f"{rail}: a duplicate address across the nodes: {ips}"
            (subnet,) = {vf.subnet for vf in stack.fake_node.rail_vfs(rail)}
            assert all(ip in netaddr.IPNetwork(subnet) for ip in ips), (rail, ips)
            # Every address is whereabouts' own lease for exactly that Pod, on either node.
            network = f"ai-workloads-{rail}"
            held = stack.cluster.whereabouts_allocations([network])
            for obs, row in rows:
                ref = f"{obs.pod['metadata']['namespace']}/{obs.pod['metadata']['name']}"
                assert any(ref in lease for lease in held), (ref, row.ip, held)
        for obs in observed:
            assert check_addresses(stack.on(_node(obs)), obs).status == PASS
            assert check_shadows(obs, 2).status == PASS, check_shadows(obs, 2)


def test_host_local_leases_each_nodes_cluster_addresses_from_its_own_range(two_node_stack: Stack) -> None:
    stack = two_node_stack
    assert netaddr.IPNetwork(stack.pod_subnet) != netaddr.IPNetwork(SECOND_NODE_POD_SUBNET)
    with pods_on_both_nodes(stack, 2) as observed:
        seen = []
        for node in stack.nodes:
            mine = [o for o in observed if _node(o) == node.node_name]
            eth0 = [netaddr.IPNetwork(a).ip for o in mine for a in ipv4_addresses(o.links["eth0"])]
            assert len(eth0) == len(mine) == 2
            assert all(ip in netaddr.IPNetwork(node.pod_subnet) for ip in eth0), (node.pod_subnet, eth0)
            # host-local's dataDir of this node holds exactly the leases of this node's Pods.
            leased = {
                netaddr.IPAddress(p.name)
                for p in node.cni.host_local_dir.rglob("*")
                if p.is_file() and p.name[0].isdigit() and not p.name.startswith("last_reserved_ip")
            }
            assert leased == set(eth0), (node.node_name, leased, eth0)
            seen += eth0
        assert len(set(seen)) == 4


def test_the_orphan_scan_of_each_node_ignores_the_other_nodes_shadows(two_node_stack: Stack) -> None:
    stack = two_node_stack
    with pods_on_both_nodes(stack, 1) as observed:
        by_node = {_node(o): {s["metadata"]["name"] for s in o.shadows} for o in observed}
        assert len(by_node) == 2 and all(len(names) == 2 for names in by_node.values())
        for node in stack.nodes:
            doc = node.driver.orphan_scan()
            assert doc["orphans"] == [], doc
            listed = {s["name"] for s in doc["shadows"]}
            assert listed == by_node[node.node_name], (node.node_name, listed, by_node)
            assert {s["status"] for s in doc["shadows"]} == {"Ready"}
