"""The route adapter on a real network namespace: default routes replaced, others kept."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cni_shim.errors import CniError
from cni_shim.node.routes import IpRoutes

pytestmark = pytest.mark.netns


def _ip(netns: str, *args: str) -> str:
    return subprocess.run(
        ["ip", "-n", Path(netns).name, *args], capture_output=True, text=True, check=True
    ).stdout


def _net1_with_default_route(ns: str, *extra: list[str]) -> None:
    """net1 (a veth) up at 10.5.0.2/24 with a default route via 10.5.0.254, then `extra` ip commands."""
    name = Path(ns).name
    subprocess.run(
        ["ip", "-n", name, "link", "add", "net1", "type", "veth", "peer", "name", "peer1"], check=True
    )
    for cmd in (
        ["link", "set", "net1", "up"],
        ["link", "set", "peer1", "up"],
        ["addr", "add", "10.5.0.2/24", "dev", "net1"],
        ["route", "add", "default", "via", "10.5.0.254", "dev", "net1"],
        *extra,
    ):
        subprocess.run(["ip", "-n", name, *cmd], check=True)


def test_replace_defaults_in_a_real_netns(netns):
    ns = netns()
    _net1_with_default_route(ns, ["route", "add", "10.9.0.0/16", "via", "10.5.0.254", "dev", "net1"])
    IpRoutes().replace_defaults(ns, "net1", ["10.5.0.1"])
    routes = _ip(ns, "route", "show")
    assert [line.strip() for line in routes.splitlines() if line.startswith("default")] == [
        "default via 10.5.0.1 dev net1"
    ]
    assert "10.9.0.0/16 via 10.5.0.254 dev net1" in routes
    IpRoutes().replace_defaults(ns, "net1", [])
    assert "default" not in _ip(ns, "route", "show")
    with pytest.raises(CniError) as err:
        IpRoutes().replace_defaults(ns, "net1", ["10.77.0.1"])  # not on-link
    assert err.value.reason == "DefaultRouteFailed"


def test_a_missing_interface_is_no_delete_error_but_a_requested_gateway_on_it_fails(netns):
    """Multus's DeleteDefaultGW looks the link up by name and, not finding it, lists the whole
    netns: every default route there goes and nothing fails; SetDefaultGW then needs the link."""
    ns = netns()
    _net1_with_default_route(ns)
    IpRoutes().replace_defaults(ns, "eth0", [])
    assert "default" not in _ip(ns, "route", "show")
    IpRoutes().replace_defaults(ns, "eth0", [])  # no route of either family left: still no error
    with pytest.raises(CniError) as err:
        IpRoutes().replace_defaults(ns, "eth0", ["10.5.0.1"])
    assert (
        err.value.message == "error setting default gateway: SetDefaultGW: Error getting link Link not found"
    )
