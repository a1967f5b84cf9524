"""No VF without an allocation: which devices a delegate would receive, and whether this Pod was given them.

DRA's exclusivity (and a device plugin's) ends where a CNI plugin takes a device by name: a NAD
whose config says `"type":"sriov","deviceID":"<a VF>"` moves that VF into whichever Pod selects
it. So before any delegate runs, every device a Pod-selected delegate names is looked up on the
node (cni_shim.ports.NodeDevices); one that is an SR-IOV virtual function must be the VF of the
managed shadow the guard verified for this Pod, or part of the kubelet's device-plugin
allocation for this Pod under the NAD's resourceName. Everything else about the delegate is
Multus's business and unchanged.

Plugins decode their config with Go's case-insensitive field matching, so keys are compared
folded, and a device name can hide at any depth (args.cni, runtimeConfig), so the whole config
is walked. Pure: the node's answers come in as data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cni_shim import reasons
from cni_shim.core.network import Network
from cni_shim.errors import INVALID_NETWORK_CONFIG, CniError
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

# How a device is named: a PCI address, a host netdev name, a MAC address, a sysfs device path.
PCI = "pci"
NETDEV = "netdev"
HWADDR = "hwaddr"
KERNELPATH = "kernelpath"

# Keys (folded) that carry a PCI address for sriov-cni, ib-sriov, host-device, vdpa and the like.
_PCI_KEYS = ("deviceid", "pcibusid")
# host-device's other ways of naming the device it moves into the Pod.
_HOST_DEVICE_KEYS = {"device": NETDEV, "hwaddr": HWADDR, "kernelpath": KERNELPATH}
_MAX_DEPTH = 32


class DeviceRef(TypedTuple):
    """One device a delegate would receive: how it is named, the name, and where it was found."""

    kind: str
    value: str
    where: str


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str) and v]
    return []


def _walk(node: Any, path: str, depth: int, out: list[DeviceRef]) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, Mapping):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if str(key).lower() in _PCI_KEYS:
                out.extend(DeviceRef(PCI, v, where) for v in _strings(value))
            else:
                _walk(value, where, depth + 1, out)
    elif isinstance(node, list):
        for idx, item in enumerate(node):
            _walk(item, f"{path}[{idx}]", depth + 1, out)


def references(
    net: Network, capability_args: Mapping[str, Any], cni_args: Iterable[tuple[str, str]]
) -> tuple[DeviceRef, ...]:
    """Every device name the delegate's config, its runtimeConfig and its CNI_ARGS carry."""
    out: list[DeviceRef] = []
    for idx, plugin in enumerate(net.plugins):
        at = f"plugins[{idx}]" if net.conflist else ""
        _walk(plugin, at, 0, out)
        if plugin.get("type") == "host-device":
            for key, value in plugin.items():
                kind = _HOST_DEVICE_KEYS.get(str(key).lower())
                if kind is not None:
                    where = f"{at}.{key}" if at else str(key)
                    out.extend(DeviceRef(kind, v, where) for v in _strings(value))
    for key, value in capability_args.items():
        if key.lower() in _PCI_KEYS:
            out.extend(DeviceRef(PCI, v, f"runtimeConfig.{key}") for v in _strings(value))
    for key, text in cni_args:
        if key.lower() in _PCI_KEYS and text:
            out.append(DeviceRef(PCI, text, f"CNI_ARGS {key}"))
    return tuple(out)


def unbound(resolved: Sequence[tuple[DeviceRef, str | None]], bound_pci: str) -> list[tuple[DeviceRef, str]]:
    """The VFs among `resolved` (each reference with the VF it names, None when it names no VF)
    other than the one a verified managed shadow binds to this Pod."""
    return [(ref, vf) for ref, vf in resolved if vf is not None and vf != bound_pci]


def first_unallocated(
    vfs: Sequence[tuple[DeviceRef, str]], allocated: frozenset[str]
) -> tuple[DeviceRef, str] | None:
    """The first VF the Pod's device-plugin allocation does not hold; None when it holds them all."""
    return next(((ref, vf) for ref, vf in vfs if vf not in allocated), None)


def describe(ref: DeviceRef) -> str:
    """Where the delegate names the device, as a refusal words it."""
    if ref.where.startswith(("runtimeConfig.", "CNI_ARGS ")):
        return f"{ref.where} {ref.value}"
    return f"{ref.where} {ref.value} in its config"


def refusal(prefix: str, network: str, ref: DeviceRef, vf: str, pod_label: str) -> CniError:
    """Multus's wording style (its prefix and chain), with this check's own cause at the end."""
    return CniError(
        reasons.VIRTUAL_FUNCTION_NOT_ALLOCATED,
        f"{prefix}error loading k8s delegates k8s args: network {network}: SR-IOV virtual function "
        f"{vf} ({describe(ref)}) is not allocated to pod {pod_label}; refused before any delegate ran",
        INVALID_NETWORK_CONFIG,
    )
