"""deviceID -> PF, VF index and netdev, read from sysfs the way sriov-cni does.

The root defaults to /sys; tests point it at a fake node's tree with SRIOV_SYSFS_ROOT.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from plugins.sriov.config import ConfError

_USERSPACE_DRIVERS = ("vfio-pci", "uio_pci_generic", "igb_uio")


@dataclass(frozen=True)
class VfInfo:
    pci: str
    pf: str
    vf_index: int
    netdev: str  # empty in DPDK mode
    dpdk: bool


def _first_entry(directory: Path) -> str:
    entries = sorted(os.listdir(directory))
    return entries[0] if entries else ""


def resolve_vf(root: str, bdf: str) -> VfInfo:
    devices = Path(root) / "bus/pci/devices"
    physfn_net = devices / bdf / "physfn/net"
    try:
        os.lstat(physfn_net)
        pf = _first_entry(physfn_net)
    except OSError as exc:
        raise ConfError(f'failed to get VF information: "lstat {physfn_net}: {_strerror(exc)}"') from None
    pf_device = Path(root) / "class/net" / pf / "device"
    index = _vf_index(pf_device, pf, bdf)
    try:
        netdev = _first_entry(devices / bdf / "net")
    except OSError:
        netdev = ""
    dpdk = False
    if not netdev:
        driver = devices / bdf / "driver"
        dpdk = driver.is_symlink() and driver.resolve().name in _USERSPACE_DRIVERS
        if not dpdk:
            raise ConfError(f"the VF {bdf} does not have a interface name or a dpdk driver")
    return VfInfo(bdf, pf, index, netdev, dpdk)


def _vf_index(pf_device: Path, pf: str, bdf: str) -> int:
    try:
        numvfs = int((pf_device / "sriov_numvfs").read_text().strip())
    except (OSError, ValueError):
        numvfs = 0
    for i in range(numvfs):
        link = pf_device / f"virtfn{i}"
        if link.is_symlink() and Path(os.readlink(link)).name == bdf:
            return i
    raise ConfError(f"unable to get VF ID with PF: {pf} and VF pci address {bdf}")


def _strerror(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()
