"""ADD/DEL/CHECK of the sriov test plugin, mirroring sriov-cni's sequence and error texts."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from plugins import skel
from plugins.delegate import exec_delegate
from plugins.result import from_current, to_current
from plugins.sriov import state
from plugins.sriov.config import (
    ConfError,
    NetConf,
    check_cni_args,
    data_dir_of,
    effective_mac,
    parse_netconf,
    sysfs_root,
)
from plugins.sriov.sysfs import VfInfo, resolve_vf

log = logging.getLogger("sriov")
_LEVELS = {
    "panic": logging.CRITICAL,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}


class LinkState(Protocol):
    @property
    def mac(self) -> str: ...
    @property
    def mtu(self) -> int: ...


class VfLinks(Protocol):
    """The netlink operations ADD/DEL need (see plugins.sriov.netlink.Netlink)."""

    def host_link(self, name: str) -> LinkState | None: ...
    def has_link(self, netns: str, name: str) -> bool: ...
    def attach(self, host_name: str, netns: str, ifname: str, mac: str, up: bool) -> LinkState: ...
    def configure_ips(
        self, netns: str, ifname: str, ips: Sequence[Mapping[str, Any]], routes: Sequence[Mapping[str, Any]]
    ) -> None: ...
    def release(self, netns: str, ifname: str, host_name: str, mac: str, mtu: int) -> bool: ...


def setup_logging(conf: Mapping[str, Any]) -> None:
    handler: logging.Handler
    handler = logging.FileHandler(str(conf["logFile"])) if conf.get("logFile") else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] sriov: %(message)s"))
    log.addHandler(handler)
    log.setLevel(_LEVELS.get(str(conf.get("logLevel") or "info"), logging.INFO))


def _load(args: skel.CmdArgs) -> tuple[NetConf, VfInfo, str]:
    try:
        netconf = parse_netconf(args.conf, os.environ)
        vf = resolve_vf(sysfs_root(os.environ), netconf.device_id)
    except ConfError as exc:
        raise skel.CniError(skel.INTERNAL, f"SRIOV-CNI failed to load netconf: LoadConf(): {exc}") from None
    try:
        cni_args = args.cni_args()
        check_cni_args(cni_args)
    except (ConfError, skel.CniError) as exc:
        raise skel.CniError(skel.INTERNAL, f"SRIOV-CNI failed to parse args: {exc}") from None
    return netconf, vf, effective_mac(netconf, cni_args)


def _open_netns(path: str) -> None:
    if not os.path.exists(path):
        raise skel.CniError(
            skel.INTERNAL,
            f'failed to open netns "{path}": failed to Statfs "{path}": no such file or directory',
        )


def cmd_add(args: skel.CmdArgs, links: VfLinks) -> dict[str, Any]:
    netconf, vf, mac = _load(args)
    _open_netns(args.netns)
    if vf.dpdk:
        raise skel.CniError(
            skel.INTERNAL, f"VF {vf.pci} is bound to a userspace driver; this test plugin needs a netdev"
        )
    with state.device_lock(netconf.data_dir, vf.pci):
        state.check_allocation(netconf.data_dir, vf.pci)
        where = f'failed to set up pod interface "{args.ifname}" from the device "{vf.pf}"'
        original = links.host_link(vf.netdev)
        if original is None:
            raise skel.CniError(
                skel.INTERNAL, f"{where}: failed to get VF netdevice with name {vf.netdev}: Link not found"
            )
        if links.has_link(args.netns, args.ifname):
            raise skel.CniError(
                skel.INTERNAL, f"{where}: interface {args.ifname} already exists in {args.netns}"
            )
        try:
            attached = links.attach(
                vf.netdev, args.netns, args.ifname, mac, up=netconf.link_state != "disable"
            )
        except Exception as exc:
            raise skel.CniError(skel.INTERNAL, f"{where}: {exc}") from None
        log.info("moved %s (%s) into %s as %s", vf.netdev, vf.pci, args.netns, args.ifname)
        try:
            result = _add_ipam(args, netconf, vf, attached, links)
            cache = _cache_doc(netconf, vf, original, mac, attached)
            state.save_cache(netconf.data_dir, args.container_id, args.ifname, cache)
            state.save_allocation(netconf.data_dir, vf.pci, args.netns)
        except BaseException:
            links.release(args.netns, args.ifname, vf.netdev, original.mac, original.mtu)
            raise
    return from_current(result, netconf.cni_version)


def _add_ipam(
    args: skel.CmdArgs, netconf: NetConf, vf: VfInfo, attached: LinkState, links: VfLinks
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "interfaces": [{"name": args.ifname, "mac": attached.mac, "mtu": attached.mtu, "sandbox": args.netns}]
    }
    if not netconf.ipam_type:
        return result
    try:
        ipam = exec_delegate(netconf.ipam_type, "ADD", args.stdin)
    except skel.CniError as exc:
        raise skel.CniError(
            skel.INTERNAL,
            f'failed to set up IPAM plugin type "{netconf.ipam_type}" from the device "{vf.pf}": {exc.msg}',
        ) from None
    try:
        current = to_current(ipam or {}, netconf.cni_version)
        if not current.get("ips"):
            raise skel.CniError(skel.INTERNAL, "IPAM plugin returned missing IP config")
        ips = [{**ip, "interface": 0} for ip in current["ips"]]
        links.configure_ips(args.netns, args.ifname, ips, current.get("routes") or [])
    except BaseException:
        exec_delegate(netconf.ipam_type, "DEL", args.stdin)
        raise
    result.update({k: v for k, v in current.items() if k in ("routes", "dns") and v})
    result["ips"] = ips
    return result


def _cache_doc(
    netconf: NetConf, vf: VfInfo, original: LinkState, mac: str, attached: LinkState
) -> dict[str, Any]:
    """The NetConf as sriov-cni caches it: the user's keys plus what DEL needs to restore."""
    return {
        **netconf.raw,
        "OrigVfState": {
            "HostIFName": vf.netdev,
            "EffectiveMAC": original.mac,
            "AdminMAC": original.mac,
            "MTU": original.mtu,
            "SpoofChk": True,
            "Trust": False,
            "Vlan": 0,
            "VlanQoS": 0,
            "VlanProto": "802.1q",
            "MinTxRate": 0,
            "MaxTxRate": 0,
            "LinkState": 0,
        },
        "Master": vf.pf,
        "MAC": mac,
        "MTU": attached.mtu,
        "VFID": vf.vf_index,
        "deviceID": vf.pci,
        "dataDir": netconf.data_dir,
    }


def cmd_del(args: skel.CmdArgs, links: VfLinks) -> None:
    data_dir = data_dir_of(args.conf, os.environ)
    cache = state.load_cache(data_dir, args.container_id, args.ifname)
    if cache is None:
        log.info("no cache for %s-%s: nothing to do", args.container_id, args.ifname)
        return
    bdf = str(cache["deviceID"])
    with state.device_lock(data_dir, bdf):
        ipam_type = str((cache.get("ipam") or {}).get("type") or "")
        if ipam_type:
            exec_delegate(ipam_type, "DEL", args.stdin)
        if args.netns and os.path.exists(args.netns):
            orig = cache["OrigVfState"]
            links.release(args.netns, args.ifname, orig["HostIFName"], orig["EffectiveMAC"], int(orig["MTU"]))
            state.drop_allocation(data_dir, bdf)
        state.drop_cache(data_dir, args.container_id, args.ifname)
