"""The node's SR-IOV PFs as sysfs shows them (``/sys`` on a node, a sysfs-shaped tree in tests).

A PF is a PCI network function with ``sriov_totalvfs``; its VFs are its ``virtfn<N>`` links. The
operator shares no code with the driver (an import-linter contract), and reads a different shape:
PF-centric, with the VF counts, drivers and netdev names upstream's node state carries.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sriov_operator.core.nodestate import PfReading, VfReading
from sriov_operator.reasons import NODE_INVENTORY_UNREADABLE, fail

_NETWORK_CLASS = 0x02
_LINK_TYPES = {"1": "ETH", "32": "IB"}
_VIRTFN = re.compile(r"virtfn(\d+)")


def _text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _number(path: Path) -> int:
    text = _text(path)
    return int(text) if text.isdigit() else 0


def _pci_id(path: Path) -> str:
    return _text(path).lower().removeprefix("0x")


def _netdevs(dev: Path) -> list[str]:
    try:
        return sorted(p.name for p in (dev / "net").iterdir())
    except OSError:
        return []


def _driver(dev: Path) -> str:
    link = dev / "driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else ""


def _is_sriov_pf(dev: Path) -> bool:
    try:
        network = int(_text(dev / "class") or "0", 16) >> 16 == _NETWORK_CLASS
    except ValueError:
        return False
    return network and (dev / "sriov_totalvfs").exists() and not (dev / "physfn").is_symlink()


def _vfs(dev: Path) -> tuple[VfReading, ...]:
    out = []
    for entry in dev.iterdir():
        m = _VIRTFN.fullmatch(entry.name)
        if not m:
            continue
        vf = entry.resolve()
        names = _netdevs(vf)
        out.append(
            VfReading(
                pci=vf.name,
                vf_id=int(m.group(1)),
                vendor=_pci_id(vf / "vendor"),
                device_id=_pci_id(vf / "device"),
                driver=_driver(vf),
                netdev=names[0] if names else "",
            )
        )
    return tuple(out)


def read_pfs(sysfs: Path) -> list[PfReading]:
    devices = sysfs / "bus" / "pci" / "devices"
    try:
        entries = sorted(devices.iterdir())
    except OSError as exc:
        raise fail(
            NODE_INVENTORY_UNREADABLE,
            f"cannot list PCI devices under {devices} ({exc}); mount the host's /sys (--sysfs-root)",
        ) from None
    pfs = []
    for dev in entries:
        if not _is_sriov_pf(dev):
            continue
        names = _netdevs(dev)
        name = names[0] if names else ""
        pfs.append(
            PfReading(
                name=name,
                pci=dev.name,
                vendor=_pci_id(dev / "vendor"),
                device_id=_pci_id(dev / "device"),
                link_type=_LINK_TYPES.get(_text(sysfs / "class" / "net" / name / "type"), "") if name else "",
                num_vfs=_number(dev / "sriov_numvfs"),
                total_vfs=_number(dev / "sriov_totalvfs"),
                vfs=_vfs(dev),
            )
        )
    return pfs
