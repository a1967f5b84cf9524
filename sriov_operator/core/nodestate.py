"""The inventory a node reports as SriovNetworkNodeState.status (upstream field spellings).

The node-policy controller translates pfNames and VF device IDs and detects overlapping policies
from this inventory (spec 12.2.4: "check translated filters against current node inventory"), so
it must be what the node's sysfs holds now. The status is deterministic (PFs and VFs sorted by
PCI address, absent values omitted) so an unchanged node writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

SYNC_SUCCEEDED: Final = "Succeeded"


@dataclass(frozen=True)
class VfReading:
    pci: str
    vf_id: int
    vendor: str
    device_id: str
    driver: str  # "" when unbound
    netdev: str  # "" when the bound driver exposes none (vfio-pci)


@dataclass(frozen=True)
class PfReading:
    name: str
    pci: str
    vendor: str
    device_id: str
    link_type: str  # "ETH", "IB" or "" when sysfs does not say
    num_vfs: int
    total_vfs: int
    vfs: tuple[VfReading, ...]


def _present(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v != ""}


def interfaces(pfs: Sequence[PfReading]) -> list[dict[str, Any]]:
    out = []
    for pf in sorted(pfs, key=lambda p: p.pci):
        vfs = [
            _present(
                {
                    "pciAddress": vf.pci,
                    "vfID": vf.vf_id,
                    "vendor": vf.vendor,
                    "deviceID": vf.device_id,
                    "driver": vf.driver,
                    "name": vf.netdev,
                }
            )
            for vf in sorted(pf.vfs, key=lambda v: v.pci)
        ]
        itf = _present(
            {
                "name": pf.name,
                "pciAddress": pf.pci,
                "vendor": pf.vendor,
                "deviceID": pf.device_id,
                "linkType": pf.link_type,
                "numVfs": pf.num_vfs,
                "totalvfs": pf.total_vfs,
            }
        )
        if vfs:
            itf["Vfs"] = vfs
        out.append(itf)
    return out


def status_patch(state: Mapping[str, Any] | None, pfs: Sequence[PfReading]) -> dict[str, Any] | None:
    """The status to write for `pfs`, or None when `state` already reports exactly that."""
    desired = {"interfaces": interfaces(pfs), "syncStatus": SYNC_SUCCEEDED}
    current = (state or {}).get("status") or {}
    if {k: current.get(k) for k in desired} == desired:
        return None
    return {"status": desired}
