"""The RDMA device of a VF and its character devices, as sysfs names them.

A kernel-bound RDMA-capable VF has ``<vf>/infiniband/<name>``; its verbs device is the
``class/infiniband_verbs/uverbs<N>`` whose ``ibdev`` file holds that name, and the node-wide
connection manager shows as ``class/misc/rdma_cm``. A VF bound to vfio-pci, or without RDMA, has
none of these, which is not an error: the VF simply has no RDMA side to hand out.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sriov_dra.model import RdmaDevice

log = logging.getLogger(__name__)


def _subdirs(path: Path) -> list[str]:
    try:
        return sorted(p.name for p in path.iterdir() if p.is_dir())
    except OSError:
        return []


def _ibdev(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def rdma_device(sysfs: Path, bdf: str) -> RdmaDevice | None:
    """The VF's RDMA device, or None when it has none (or several, which no VF driver creates)."""
    names = _subdirs(sysfs / "bus" / "pci" / "devices" / bdf / "infiniband")
    if len(names) != 1:
        if names:
            log.warning("VF %s has several RDMA devices %s; handing out none of them", bdf, names)
        return None
    name = names[0]
    verbs = sysfs / "class" / "infiniband_verbs"
    uverbs = next(
        (n for n in _subdirs(verbs) if n.startswith("uverbs") and _ibdev(verbs / n / "ibdev") == name), None
    )
    return RdmaDevice(name=name, uverbs=uverbs, rdma_cm=(sysfs / "class" / "misc" / "rdma_cm").exists())
