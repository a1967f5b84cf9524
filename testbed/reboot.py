"""A node's reboot on the bed (issue #35 item 2): a power loss, then a boot on what stayed on disk.

What a reboot clears is exactly what lives in the kernel or on a tmpfs: every process of the node
(kubelet, containerd, shims, containers, the driver, cni-shim-daemon), every mount, network
namespace and the veths moved into Pods, the node's cgroups, and its /run: containerd's state
directory, the daemon's socket directory and the CDI specs (/var/run/cdi). A VF whose Pod's
namespace died falls back to the host with its own name, down and without addresses (the fake
node's ``heal``; a VF that stayed on the host is reset the same way, as a driver reload would).
What stays is what sits under /var/lib on a real node: containerd's root (images, the sandboxes'
metadata), the kubelet's root directory (its DRA state, the driver's checkpoint), the CNI caches
(cni-shim's delegate cache, libcni's results), host-local's leases and the sriov plugin's data.

Then the node boots as systemd would start it: containerd, the kubelet (until Ready), the driver
(until the kubelet registered it) and cni-shim-daemon (until it serves). The stack runs the
driver and the daemon as host processes (``install=processes``), the fast inner loop the soak
and the e2e tests use.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from pyroute2 import IPRoute

from testbed import host_state
from testbed.stack import Stack
from testbed.waiting import wait_for

SETTLE_S = 20.0  # a dead namespace's veths go asynchronously


@dataclass(frozen=True)
class Reboot:
    node: str
    vfs_returned: int  # VFs that were in a Pod's namespace and came back to the host
    down_s: float  # power off until the node serves again (driver registered, daemon serving)


def power_off(stack: Stack) -> list[str]:
    """Everything of the node that a power loss ends; returns the VFs that were inside Pods."""
    node = stack.fake_node
    in_pods = [vf.netdev for vf in node.vfs if vf.netdev not in set(_host_link_names())]
    products = [p.proc for p in (stack.host_driver.process, stack.cni.daemon) if p is not None]
    # The driver and the daemon die with their children (the daemon's delegates: CNI plugins).
    stack.node_runtime.power_off(also=[proc.pid for proc in products])
    for proc in products:
        proc.wait()
    for run_dir in (stack.cni.socket_dir, stack.node_runtime.cdi_dir):
        host_state.empty_dir(run_dir)

    def settled() -> bool:
        # Each VF is on the host or died with a Pod's namespace (which goes asynchronously).
        lost, home = set(node.lost()), set(_host_link_names())
        return all(vf.netdev in lost or vf.netdev in home for vf in node.vfs)

    wait_for(settled, SETTLE_S, what="the Pods' namespaces to go", interval=0.1)
    # Back on the host, as a real VF is.
    node.heal()
    _reset(vf.netdev for vf in node.vfs)
    return in_pods


def boot(stack: Stack) -> None:
    """containerd, the kubelet, the driver and the daemon, in the order a node starts them."""
    stack.node_runtime.boot()
    driver = stack.host_driver
    before = driver.registrations()
    driver.start()
    driver.wait_registered(before)
    stack.cni.start_daemon()


def reboot(stack: Stack) -> Reboot:
    started = time.monotonic()
    returned = power_off(stack)
    boot(stack)
    return Reboot(stack.node_name, len(returned), round(time.monotonic() - started, 1))


def _host_link_names() -> list[str]:
    with IPRoute() as ipr:
        return [str(link.get("ifname")) for link in ipr.get_links()]


def _reset(names: Iterable[str]) -> None:
    """Down and without addresses: a VF as its driver leaves it at boot."""
    with IPRoute() as ipr:
        for name in names:
            for index in ipr.link_lookup(ifname=name):
                ipr.link("set", index=index, state="down")
                ipr.flush_addr(index=index)
