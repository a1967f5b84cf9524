"""Two of a node's bad moments for the soak (issue #35): a PF's link flaps, and the CNI delegate
cache is lost (a cniDir on a tmpfs, a careless cleanup). Each returns when it is over."""

from __future__ import annotations

import time

from pyroute2 import IPRoute

from testbed import host_state
from testbed.stack import Stack


def flap_link(stack: Stack, pf: int, down_s: float) -> str:
    """Take the node's ``pf``-th PF link down for ``down_s`` seconds, then up again; returns its
    name. The VFs in Pods stay where they are, as a real VF does while its PF's link is down."""
    name = stack.fake_node.pfs[pf % len(stack.fake_node.pfs)].netdev
    with IPRoute() as ipr:
        (index,) = ipr.link_lookup(ifname=name)
        ipr.link("set", index=index, state="down")
        time.sleep(down_s)  # the length of the outage is the point, nothing to wait for
        ipr.link("set", index=index, state="up")
    return name


def delete_cni_cache(stack: Stack) -> int:
    """Delete every entry of the node's cni-shim delegate cache (its cniDir); returns how many.
    A DEL that comes after it rebuilds the delegates from the Pod's shadows."""
    return host_state.empty_dir(stack.cni.shim_cache)
