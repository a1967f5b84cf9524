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

import contextlib
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute

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
    if stack.cni.daemon is not None:
        stack.cni.daemon.proc.kill()
        stack.cni.daemon.proc.wait()
    driver = stack.host_driver.process
    if driver is not None:
        driver.proc.kill()
        driver.proc.wait()
    node = stack.fake_node
    on_host = set(_host_link_names())
    in_pods = [vf.netdev for vf in node.vfs if vf.netdev not in on_host]
    stack.node_runtime.power_off()
    for run_dir in (stack.cni.socket_dir, stack.node_runtime.cdi_dir):
        _empty(run_dir)
    # Each Pod's VF dies with the Pod's namespace; then it is back on the host, as a real VF is.
    wait_for(
        lambda: set(in_pods) <= set(node.lost()), SETTLE_S, what="the Pods' namespaces to go", interval=0.1
    )
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


def _empty(directory: Path) -> None:
    """A tmpfs after boot: the directory is there, nothing in it."""
    if directory.is_dir():
        for entry in directory.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
