"""SR-IOV inventory from sysfs: which VFs exist on this node and what upstream attributes they carry.

Reads a sysfs root (``/sys`` on a real node, a sysfs-shaped tree in tests) with the layout the
kernel uses: ``bus/pci/devices/<bdf>`` symlinks into ``devices/pci<domain>:<bus>/...``, PFs with
``virtfn<N>`` links, VFs with ``physfn``. Attribute names and meanings follow the upstream driver
so CEL selectors and Multus keep working; a value that cannot be determined is omitted rather than
published empty (an empty pcieRoot would let unrelated devices "match" each other).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.model import (
    ATTR_DEVICE_ID,
    ATTR_ESWITCH_MODE,
    ATTR_LINK_TYPE,
    ATTR_MULTUS_DEVICE_ID,
    ATTR_NUMA_NODE,
    ATTR_PCI_ADDRESS,
    ATTR_PCI_BUS_ID,
    ATTR_PCIE_ROOT,
    ATTR_PF_DEVICE_ID,
    ATTR_PF_NAME,
    ATTR_PF_PCI_ADDRESS,
    ATTR_RDMA_CAPABLE,
    ATTR_VENDOR,
    ATTR_VF_ID,
    AttributeValue,
    VirtualFunction,
    device_name,
)
from sriov_dra.sysfs.rdma import rdma_device

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$")
_PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_LINK_TYPES = {"1": "ethernet", "32": "infiniband"}
_NETWORK_CLASS = 0x02


class DiscoveryError(ReasonedError):
    """The sysfs tree cannot be read as an SR-IOV inventory."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _hex_id(path: Path) -> str | None:
    text = _read(path)
    return None if not text else text.lower().removeprefix("0x")


def pcie_root(sysfs: Path, bdf: str) -> str | None:
    """The PCIe root complex (``pciDDDD:BB``) above a device, or None when it cannot be proven."""
    if not _BDF.match(bdf):
        return None
    devices = sysfs / "bus" / "pci" / "devices"
    try:
        target = os.readlink(devices / bdf)
    except OSError:
        return None
    resolved = Path(os.path.normpath(devices / target))
    try:
        parts = resolved.relative_to(sysfs).parts
    except ValueError:
        return None
    if len(parts) < 3 or parts[0] != "devices" or parts[-1] != bdf or not _PCIE_ROOT.match(parts[1]):
        return None
    return parts[1]


def _pf_netdev(pf_dir: Path, sysfs: Path) -> str | None:
    """The PF's uplink netdev: a switchdev uplink representor (p<N>) if present, else the first."""
    try:
        names = sorted(p.name for p in (pf_dir / "net").iterdir())
    except OSError:
        return None
    for name in names:
        netdir = sysfs / "class" / "net" / name
        if _read(netdir / "phys_switch_id") and re.fullmatch(r"p\d+", _read(netdir / "phys_port_name") or ""):
            return name
    return names[0] if names else None


def _numa(dev_dir: Path) -> int:
    try:
        return int(_read(dev_dir / "numa_node") or "-1")
    except ValueError:
        return -1


def _virtfns(pf_dir: Path) -> Iterator[tuple[int, str]]:
    for entry in pf_dir.iterdir():
        m = re.fullmatch(r"virtfn(\d+)", entry.name)
        if m:
            try:
                yield int(m.group(1)), os.path.basename(os.readlink(entry))
            except OSError as exc:
                raise DiscoveryError(
                    reasons.UNREADABLE_VIRTUAL_FUNCTION,
                    f"cannot read {entry} ({exc}); check the PF's SR-IOV configuration",
                ) from exc


def discover(sysfs: Path) -> dict[str, VirtualFunction]:
    """Every VF of every SR-IOV network PF under ``sysfs``, keyed by slice device name."""
    devices_dir = sysfs / "bus" / "pci" / "devices"
    try:
        bdfs = sorted(p.name for p in devices_dir.iterdir())
    except OSError as exc:
        raise DiscoveryError(
            reasons.SYSFS_UNREADABLE,
            f"cannot list PCI devices under {devices_dir} ({exc}); is sysfs mounted?",
        ) from exc
    inventory: dict[str, VirtualFunction] = {}
    for pf_bdf in bdfs:
        pf_dir = devices_dir / pf_bdf
        cls = _read(pf_dir / "class")
        try:
            if cls is None or int(cls, 16) >> 16 != _NETWORK_CLASS or (pf_dir / "physfn").is_symlink():
                continue
        except ValueError:
            continue
        pf_name = _pf_netdev(pf_dir, sysfs)
        if pf_name is None:
            continue
        link_type = _LINK_TYPES.get(_read(sysfs / "class" / "net" / pf_name / "type") or "", "unknown")
        shared: dict[str, AttributeValue] = {
            ATTR_PF_NAME: pf_name,
            ATTR_PF_PCI_ADDRESS: pf_bdf,
            ATTR_ESWITCH_MODE: "legacy",
            ATTR_LINK_TYPE: link_type,
            ATTR_NUMA_NODE: _numa(pf_dir),
        }
        for key, value in (
            (ATTR_VENDOR, _hex_id(pf_dir / "vendor")),
            (ATTR_PF_DEVICE_ID, _hex_id(pf_dir / "device")),
            (ATTR_PCIE_ROOT, pcie_root(sysfs, pf_bdf)),
        ):
            if value:
                shared[key] = value
        for vf_id, vf_bdf in sorted(_virtfns(pf_dir)):
            vf_dir = devices_dir / vf_bdf
            attrs = dict(shared)
            attrs.update(
                {
                    ATTR_PCI_ADDRESS: vf_bdf,
                    ATTR_MULTUS_DEVICE_ID: vf_bdf,
                    ATTR_PCI_BUS_ID: vf_bdf,
                    ATTR_VF_ID: vf_id,
                    ATTR_RDMA_CAPABLE: _has_subdir(vf_dir / "infiniband"),
                }
            )
            vf_device_id = _hex_id(vf_dir / "device")
            if vf_device_id:
                attrs[ATTR_DEVICE_ID] = vf_device_id
            name = device_name(vf_bdf)
            inventory[name] = VirtualFunction(
                name=name,
                pci_address=vf_bdf,
                pf_pci_address=pf_bdf,
                pf_name=pf_name,
                vf_id=vf_id,
                attributes=attrs,
                rdma=rdma_device(sysfs, vf_bdf),
            )
    return inventory


def _has_subdir(path: Path) -> bool:
    try:
        return any(p.is_dir() for p in path.iterdir())
    except OSError:
        return False
