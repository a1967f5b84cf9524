"""nicSelector to the driver's ResourceFilter, and each policy's VF set on one node (spec 12.2.4).

The driver matches a filter against each VF's published attributes (vendor, VF deviceID, PF
kernel name, PF PCI address, link type); a filter with no field set matches every VF. So a
selector that cannot be expressed exactly is refused for managed (dra) policies instead of being
approximated: netFilter, `#` VF ranges, vfio-pci and anything that translates to an empty filter
are UnsupportedManagedSelector. The VF set is computed from the node's SriovNetworkNodeState with
upstream's PF-matching rules, and is what overlap detection compares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sriov_operator.reasons import UNSUPPORTED_MANAGED_SELECTOR, fail

# PF device ID to VF device ID for NICs whose VFs the inventory does not list yet (upstream's
# supported-nic-ids table, the entries this project's fixtures and docs use).
VF_DEVICE_IDS: Final = {
    ("15b3", "1017"): "1018",
    ("15b3", "1019"): "101a",
    ("15b3", "101b"): "101c",
    ("15b3", "101d"): "101e",
    ("15b3", "a2d6"): "101e",
    ("8086", "158b"): "154c",
    ("8086", "1592"): "1889",
    ("8086", "1593"): "1889",
}
_LINK: Final = {"eth": "eth", "ib": "ib"}


@dataclass(frozen=True)
class Pf:
    """One PF of a node's inventory with its VFs' PCI addresses and device IDs."""

    name: str
    alt_names: tuple[str, ...]
    pci: str
    vendor: str
    device_id: str
    link_type: str
    vfs: tuple[tuple[str, str], ...]  # (VF PCI address, VF device ID)


def inventory(node_state: Mapping[str, Any] | None) -> list[Pf]:
    """The PFs of a SriovNetworkNodeState's status.interfaces."""
    out = []
    for itf in ((node_state or {}).get("status") or {}).get("interfaces") or []:
        out.append(
            Pf(
                name=str(itf.get("name") or ""),
                alt_names=tuple(str(a) for a in itf.get("altNames") or []),
                pci=str(itf.get("pciAddress") or ""),
                vendor=str(itf.get("vendor") or "").lower(),
                device_id=str(itf.get("deviceID") or "").lower(),
                link_type=str(itf.get("linkType") or "").lower(),
                vfs=tuple(
                    (str(vf.get("pciAddress")), str(vf.get("deviceID") or "").lower())
                    for vf in itf.get("Vfs") or []
                ),
            )
        )
    return out


def _pf_names(selector: Mapping[str, Any]) -> list[str]:
    return [str(n).partition("#")[0] for n in selector.get("pfNames") or []]


def pf_selected(spec: Mapping[str, Any], pf: Pf) -> bool:
    """Upstream's nicSelector match of one PF (vendor, PF deviceID, rootDevices, pfNames incl.
    alt names), plus the policy's linkType."""
    sel = spec.get("nicSelector") or {}
    if sel.get("vendor") and str(sel["vendor"]).lower() != pf.vendor:
        return False
    if sel.get("deviceID") and str(sel["deviceID"]).lower() != pf.device_id:
        return False
    if sel.get("rootDevices") and pf.pci not in sel["rootDevices"]:
        return False
    names = _pf_names(sel)
    if names and not ({pf.name, *pf.alt_names} & set(names)):
        return False
    link = str(spec.get("linkType") or "").lower()
    return not link or not pf.link_type or link == pf.link_type


def vf_set(spec: Mapping[str, Any], pfs: Sequence[Pf]) -> frozenset[str]:
    """PCI addresses of the VFs this policy selects on the node."""
    return frozenset(pci for pf in pfs if pf_selected(spec, pf) for pci, _ in pf.vfs)


def unsupported(spec: Mapping[str, Any]) -> list[str]:
    """Why this selector cannot be a managed driver filter (empty: it can)."""
    sel = spec.get("nicSelector") or {}
    out = []
    if sel.get("netFilter"):
        out.append("nicSelector.netFilter has no driver filter")
    if any("#" in str(n) for n in sel.get("pfNames") or []):
        out.append("pfNames with a '#' VF range has no driver filter")
    if spec.get("deviceType") == "vfio-pci":
        out.append("deviceType vfio-pci has no driver filter (the driver binds VFs itself)")
    return out


def translate(where: str, spec: Mapping[str, Any], pfs: Sequence[Pf]) -> dict[str, Any]:
    """The one ResourceFilter of a policy on a node; UnsupportedManagedSelector when it cannot be
    expressed exactly or would be empty (an empty filter matches every VF)."""
    problems = unsupported(spec)
    sel = spec.get("nicSelector") or {}
    flt: dict[str, Any] = {}
    if sel.get("vendor"):
        flt["vendors"] = [str(sel["vendor"]).lower()]
    if sel.get("deviceID"):
        pf_id = str(sel["deviceID"]).lower()
        if int(spec.get("numVfs") or 0) == 0:
            flt["devices"] = [pf_id]  # upstream: without VFs the PF itself is the device
        else:
            seen = sorted({vid for pf in pfs if pf_selected(spec, pf) for _, vid in pf.vfs if vid})
            known = VF_DEVICE_IDS.get((str(sel.get("vendor") or "").lower(), pf_id))
            if seen:
                flt["devices"] = seen
            elif known:
                flt["devices"] = [known]
            else:
                problems.append(f"the VF device ID of PF device {pf_id} is unknown on this node")
    names = _pf_names(sel)
    if names:
        # The driver matches the PF's kernel name; an alt name becomes the name it belongs to.
        primary = {alt: pf.name for pf in pfs for alt in pf.alt_names}
        flt["pfNames"] = sorted({primary.get(n, n) for n in names})
    if sel.get("rootDevices"):
        flt["pfPciAddresses"] = sorted(str(d) for d in sel["rootDevices"])
    link = _LINK.get(str(spec.get("linkType") or "").lower())
    if link:
        flt["linkType"] = link
    if not set(flt) - {"linkType"} and not problems:
        # linkType alone still matches every VF of that link type on the node.
        problems.append(
            "the selector translates to a filter without a PF or device field, which would match every VF"
        )
    if problems:
        raise fail(
            UNSUPPORTED_MANAGED_SELECTOR,
            f"{where}: " + "; ".join(problems) + "; select PFs by vendor, deviceID, pfNames or rootDevices",
        )
    return flt
