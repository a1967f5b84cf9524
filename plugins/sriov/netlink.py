"""Netlink side of the sriov test plugin (pyroute2): move a VF netdev into a netns and back."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError


@dataclass(frozen=True)
class LinkState:
    mac: str
    mtu: int


class LinkOpError(Exception):
    """A netlink operation failed; the text reads like the Go netlink library's."""


def _in_netns(netns: str) -> IPRoute:
    """A netlink socket inside the netns at ``netns``; FileNotFoundError when it is gone.

    flags=0: pyroute2's default (O_CREAT) makes a new netns at a path that is gone, after
    bind-mounting its directory onto itself, which hides every other netns mounted there (the
    runtime's then cannot be removed, EBUSY, and their Pods never finish terminating). The soak
    met it when a sandbox was torn down while its ADD was still running.
    """
    return IPRoute(netns=netns, flags=0)


def _find(ipr: Any, name: str) -> Any | None:
    found = ipr.link_lookup(ifname=name)
    return ipr.get_links(found[0])[0] if found else None


class Netlink:
    """The real adapter; every method opens its own sockets, nothing is kept between calls."""

    def host_link(self, name: str) -> LinkState | None:
        with IPRoute() as ipr:
            link = _find(ipr, name)
            return None if link is None else LinkState(link.get("address"), link.get("mtu"))

    def has_link(self, netns: str, name: str) -> bool:
        with _in_netns(netns) as ipr:
            return _find(ipr, name) is not None

    def attach(self, host_name: str, netns: str, ifname: str, mac: str, up: bool) -> LinkState:
        """Move ``host_name`` into ``netns`` as ``ifname``, set ``mac`` (if any) and bring it up."""
        with IPRoute() as host:
            link = _find(host, host_name)
            if link is None:
                raise LinkOpError(f"failed to get VF netdevice with name {host_name}: Link not found")
            fd = os.open(netns, os.O_RDONLY)
            try:
                host.link("set", index=link["index"], state="down")
                host.link("set", index=link["index"], net_ns_fd=fd)
            finally:
                os.close(fd)
        with _in_netns(netns) as ipr:
            index = ipr.link_lookup(ifname=host_name)[0]
            try:
                ipr.link("set", index=index, ifname=ifname)
                if mac:
                    ipr.link("set", index=index, address=mac)
                if up:
                    ipr.link("set", index=index, state="up")
            except NetlinkError as exc:
                # Put it back under its host name so the caller's rollback finds a clean host.
                ipr.link("set", index=index, ifname=host_name)
                ipr.link("set", index=index, net_ns_pid=os.getpid())
                raise LinkOpError(f"failed to configure {ifname} in {netns}: {exc}") from None
            link = ipr.get_links(index)[0]
            return LinkState(link.get("address"), link.get("mtu"))

    def configure_ips(
        self, netns: str, ifname: str, ips: Sequence[Mapping[str, Any]], routes: Sequence[Mapping[str, Any]]
    ) -> None:
        with _in_netns(netns) as ipr:
            index = ipr.link_lookup(ifname=ifname)[0]
            gateways: dict[int, str] = {}
            for ip in ips:
                iface = ipaddress.ip_interface(ip["address"])
                ipr.addr("add", index=index, address=str(iface.ip), prefixlen=iface.network.prefixlen)
                if ip.get("gateway"):
                    gateways.setdefault(iface.version, str(ip["gateway"]))
            for route in routes:
                dst = ipaddress.ip_network(route["dst"], strict=False)
                gateway = route.get("gw") or gateways.get(dst.version)
                spec: dict[str, Any] = {
                    "dst": str(dst.network_address),
                    "dst_len": dst.prefixlen,
                    "oif": index,
                }
                if gateway:
                    spec["gateway"] = str(gateway)
                try:
                    ipr.route("add", **spec)
                except NetlinkError as exc:
                    raise LinkOpError(f"failed to add route {route}: {exc}") from None

    def release(self, netns: str, ifname: str, host_name: str, mac: str, mtu: int) -> bool:
        """Return ``ifname`` to the host as ``host_name`` with its MAC and MTU; False if absent
        (also when the netns itself is gone: the VF went back to the host with it)."""
        try:
            ipr = _in_netns(netns)
        except FileNotFoundError:
            return False
        with ipr:
            link = _find(ipr, ifname)
            if link is None:
                return False
            index = link["index"]
            ipr.link("set", index=index, state="down")
            ipr.link("set", index=index, ifname=host_name, address=mac, mtu=mtu)
            ipr.link("set", index=index, net_ns_pid=os.getpid())
        return True
