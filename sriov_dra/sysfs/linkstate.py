"""What sysfs shows of each discovered VF's health: does the VF still exist, is its PF's link up.

One pass reads ``bus/pci/devices/<vf>`` (an lstat per VF) and ``class/net/<pf>/{operstate,carrier}``
(two small reads per PF), so polling every second costs next to nothing even with hundreds of VFs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sriov_dra.core.devicehealth import Observation
from sriov_dra.model import VirtualFunction


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # carrier refuses reads (EINVAL) while the interface is administratively down
        return None


def observe(sysfs: Path, inventory: Mapping[str, VirtualFunction]) -> dict[str, Observation]:
    """One observation per VF of ``inventory``, keyed like it."""
    links: dict[str, tuple[str | None, str | None]] = {}
    for vf in inventory.values():
        if vf.pf_name not in links:
            net = sysfs / "class" / "net" / vf.pf_name
            links[vf.pf_name] = (_read(net / "operstate"), _read(net / "carrier"))
    devices = sysfs / "bus" / "pci" / "devices"
    return {
        name: Observation(
            vf_present=(devices / vf.pci_address).exists(),
            pf_name=vf.pf_name,
            pf_operstate=links[vf.pf_name][0],
            pf_carrier=links[vf.pf_name][1],
        )
        for name, vf in inventory.items()
    }
