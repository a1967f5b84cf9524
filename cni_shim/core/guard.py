"""The managed-shadow guard (spec 10.3): metadata-only checks before any delegate runs, on ADD and
on a DEL that has no delegate cache to replay.

Given the Pod already fetched, the selection, the shadow NAD and its exact spec.config bytes,
decide whether this shadow really belongs to this Pod and VF. It reads nothing: no
ResourceClaim, no ResourceSlice, no device plugin. Each rejection names the failed check in a
stable reason. NADs without the binding annotation are ordinary and never reach this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cni_shim import reasons
from cni_shim.core import netstatus
from cni_shim.core.delegates import spec_config
from cni_shim.errors import INVALID_NETWORK_CONFIG, CniError
from sriov_contract import keys
from sriov_contract.binding import Binding, parse_binding
from sriov_contract.errors import ContractError
from sriov_contract.identity import config_sha256, shadow_name_for
from sriov_contract.networks import NetworkSelection
from sriov_contract.registry import Registry, parse_registry
from sriov_lib import rawjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]

# Metaplugins allowed after the one sriov entry of a managed conflist (spec 7, step 5).
CHAIN_ALLOWLIST = ("tuning", "rdma")


def _reject(reason: str, what: str, why: str) -> CniError:
    return CniError(
        reason,
        f"managed shadow {what} refused before any delegate ran: {why}",
        INVALID_NETWORK_CONFIG,
    )


def pod_registry(pod: Mapping[str, Any]) -> Registry:
    """The Pod's registry annotation (the caller checked it is present), validated against the Pod."""
    meta = pod.get("metadata") or {}
    text = (meta.get("annotations") or {}).get(keys.REGISTRY_ANNOTATION)
    what = f"Pod {meta.get('namespace')}/{meta.get('name')}"
    try:
        registry = parse_registry(str(text))
    except ContractError as exc:
        raise _reject(
            reasons.MANAGED_SHADOW_REGISTRY_INVALID, what, f"{keys.REGISTRY_ANNOTATION} is unusable ({exc})"
        ) from exc
    if registry.pod_uid != meta.get("uid"):
        raise _reject(
            reasons.MANAGED_SHADOW_REGISTRY_POD_MISMATCH,
            what,
            f"registry names Pod UID {registry.pod_uid}, Pod is {meta.get('uid')}",
        )
    return registry


def check_registry(registry: Registry, selections: Sequence[NetworkSelection], pod_label: str) -> None:
    """Every registered managed selection appears exactly once, with its recorded interface."""
    for entry in registry.entries:
        matches = [s for s in selections if (s.namespace, s.name) == (entry.namespace, entry.name)]
        what = f"{entry.namespace}/{entry.name} of Pod {pod_label}"
        if len(matches) != 1:
            raise _reject(
                reasons.MANAGED_SHADOW_SELECTION_COUNT,
                what,
                f"the registry lists it once but the networks annotation selects it {len(matches)} times",
            )
        if matches[0].interface != entry.interface:
            raise _reject(
                reasons.MANAGED_SHADOW_SELECTION_OVERRIDE,
                what,
                f"selection asks for interface {matches[0].interface!r}, registry records {entry.interface!r}",
            )


def _static_sriov_pci(config: bytes, what: str) -> str:
    """The one deviceID of a static sriov config (single plugin, or sriov first then allowlisted)."""
    try:
        obj = rawjson.loads(config)
    except (rawjson.RawJsonError, RecursionError) as exc:
        raise _reject(
            reasons.MANAGED_SHADOW_CONFIG_NOT_STATIC_SRIOV, what, f"spec.config is not JSON ({exc})"
        ) from exc
    if not isinstance(obj, dict):
        raise _reject(reasons.MANAGED_SHADOW_CONFIG_NOT_STATIC_SRIOV, what, "spec.config is not an object")
    if "type" in obj and "plugins" in obj:
        raise _reject(
            reasons.MANAGED_SHADOW_CONFIG_NOT_STATIC_SRIOV, what, "spec.config has both type and plugins"
        )
    plugins = [obj] if "type" in obj else obj.get("plugins")
    if not isinstance(plugins, list) or not plugins or not all(isinstance(p, dict) for p in plugins):
        raise _reject(reasons.MANAGED_SHADOW_CONFIG_NOT_STATIC_SRIOV, what, "spec.config has no plugin list")
    types = [p.get("type") for p in plugins]  # type: ignore[union-attr]
    if types[0] != "sriov" or any(t not in CHAIN_ALLOWLIST for t in types[1:]):
        raise _reject(
            reasons.MANAGED_SHADOW_CONFIG_NOT_STATIC_SRIOV,
            what,
            f"plugin chain {types} is not sriov followed by {list(CHAIN_ALLOWLIST)}",
        )
    first: dict[str, Any] = plugins[0]  # type: ignore[assignment]
    pci = first.get("deviceID")
    if not isinstance(pci, str) or not pci:
        raise _reject(
            reasons.MANAGED_SHADOW_CONFIG_NOT_STATIC_SRIOV, what, "the sriov plugin has no static deviceID"
        )
    if first.get("pciBusID") not in (None, pci):
        raise _reject(
            reasons.MANAGED_SHADOW_PCI_MISMATCH,
            what,
            f"pciBusID {first.get('pciBusID')!r} differs from deviceID {pci}",
        )
    # The rdma plugin moves the RDMA device of the VF its deviceID names: it must be this VF's.
    for p in plugins[1:]:
        if p.get("type") == "rdma" and p.get("deviceID") != pci:  # type: ignore[union-attr]
            raise _reject(
                reasons.MANAGED_SHADOW_PCI_MISMATCH,
                what,
                f"rdma plugin deviceID {p.get('deviceID')!r} differs from deviceID {pci}",  # type: ignore[union-attr]
            )
    return pci


def _check_selection(sel: NetworkSelection, binding: Binding, what: str) -> None:
    if sel.device_id is not None and sel.device_id != binding.pci_address:
        raise _reject(
            reasons.MANAGED_SHADOW_SELECTION_OVERRIDE,
            what,
            f"selection deviceID {sel.device_id} differs from bound PCI {binding.pci_address}",
        )
    if sel.interface != binding.interface:
        raise _reject(
            reasons.MANAGED_SHADOW_SELECTION_OVERRIDE,
            what,
            f"selection interface {sel.interface!r} differs from bound {binding.interface!r}",
        )
    overrides = [
        key
        for key, value in (
            ("ips", sel.ips),
            ("mac", sel.mac),
            ("infiniband-guid", sel.infiniband_guid),
            ("default-route", sel.default_route),
            ("portMappings", sel.port_mappings),
            ("bandwidth", sel.bandwidth),
            ("cni-args", sel.cni_args),
        )
        if value
    ]
    if overrides:
        raise _reject(
            reasons.MANAGED_SHADOW_SELECTION_OVERRIDE,
            what,
            f"selection carries options {overrides} a managed shadow never has",
        )


def check_shadow(
    nad: Mapping[str, Any],
    selection: NetworkSelection,
    pod: Mapping[str, Any],
    registry: Registry | None,
) -> str:
    """All of spec 10.3 for one selected shadow (Pod, node, namespace, owner, finalizer, deletion,
    resourceName, PCI, hash, registry); raises on the first failed check, returns the bound VF's PCI."""
    meta = nad.get("metadata") or {}
    what = f"{meta.get('namespace')}/{meta.get('name')}"
    binding = _binding(meta, what)
    _check_owner(meta, pod, binding, what)
    _check_config(spec_config(nad), binding, what)
    _check_selection(selection, binding, what)
    if registry is not None:
        _check_registered(registry, meta, binding, what)
    return binding.pci_address


def check_bound(nad: Mapping[str, Any], pod: Mapping[str, Any]) -> str:
    """A DEL without a delegate cache: is this shadow, as it is now, this Pod's, for its VF? Returns
    the bound PCI or raises. The checks that only matter before attaching (finalizer, deletion,
    selection, registry) are left out: a Pod's DEL meets its shadows Terminating."""
    meta = nad.get("metadata") or {}
    what = f"{meta.get('namespace')}/{meta.get('name')}"
    binding = _binding(meta, what)
    _check_bound_pod(meta, pod, binding, what)
    _check_config(spec_config(nad), binding, what)
    return binding.pci_address


def check_left_behind(nad: Mapping[str, Any], namespace: str, pod_name: str, pod_uid: str) -> Binding:
    """A DEL with neither its delegate cache nor its Pod: is this shadow, found by its labels, the
    managed shadow of the Pod the runtime names (CNI_ARGS), still protected, with the driver's
    bytes? Returns its binding or raises.

    The runtime, not the API, names the Pod UID, so a shadow can only ever be torn down in its own
    Pod's sandbox; only the driver may create an object labelled managed-by (the admission policy
    `[forged-shadow]`), and everything else a forger would have to get right is checked here as ADD's
    guard checks it against the live Pod: binding, labels, owner, name, finalizer, config bytes. A
    shadow without the finalizer is left alone: the driver has released its VF already."""
    meta = nad.get("metadata") or {}
    what = f"{meta.get('namespace')}/{meta.get('name')}"
    binding = _binding(meta, what)
    labels = meta.get("labels") or {}
    for uid in (binding.pod_uid, labels.get(keys.POD_UID_LABEL)):
        if uid != pod_uid:
            raise _reject(reasons.MANAGED_SHADOW_POD_MISMATCH, what, f"bound to Pod UID {uid}, not {pod_uid}")
    if meta.get("namespace") != namespace:
        raise _reject(
            reasons.MANAGED_SHADOW_NAMESPACE_MISMATCH,
            what,
            f"a shadow must live in the Pod namespace {namespace}",
        )
    if meta.get("name") != shadow_name_for(binding.attachment_id):
        raise _reject(
            reasons.MANAGED_SHADOW_BINDING_INVALID,
            what,
            f"the name does not derive from attachment {binding.attachment_id}",
        )
    _check_protected_owner(meta, pod_uid, what, pod_name)
    _check_config(spec_config(nad), binding, what)
    return binding


def device_info(nad: Mapping[str, Any], bound_pci: str) -> Json | None:
    """The network-status device-info of a verified shadow, from the driver's frozen device-info
    annotation (spec 10.4); None when it has none. It must describe the bound VF."""
    meta = nad.get("metadata") or {}
    text = (meta.get("annotations") or {}).get(keys.DEVICE_INFO_ANNOTATION)
    if text is None:
        return None
    what = f"{meta.get('namespace')}/{meta.get('name')}"
    from sriov_contract.deviceinfo import parse_device_info  # noqa: PLC0415 - only shadows that carry it

    try:
        info = parse_device_info(str(text))
    except ContractError as exc:
        raise _reject(
            reasons.MANAGED_SHADOW_BINDING_INVALID, what, f"{keys.DEVICE_INFO_ANNOTATION} is unusable ({exc})"
        ) from exc
    if info.pci_address != bound_pci:
        raise _reject(
            reasons.MANAGED_SHADOW_PCI_MISMATCH,
            what,
            f"device info of {info.pci_address} differs from bound PCI {bound_pci}",
        )
    return netstatus.pci_device_info(info.pci_address, info.pf_pci_address, info.rdma_device)


def _binding(meta: Mapping[str, Any], what: str) -> Binding:
    text = (meta.get("annotations") or {}).get(keys.BINDING_ANNOTATION)
    if not isinstance(text, str):
        raise _reject(reasons.MANAGED_SHADOW_BINDING_INVALID, what, f"{keys.BINDING_ANNOTATION} is missing")
    try:
        return parse_binding(text)
    except ContractError as exc:
        raise _reject(
            reasons.MANAGED_SHADOW_BINDING_INVALID, what, f"{keys.BINDING_ANNOTATION} is unusable ({exc})"
        ) from exc


def _check_bound_pod(meta: Mapping[str, Any], pod: Mapping[str, Any], binding: Binding, what: str) -> None:
    """The binding names this Pod, its node and its namespace."""
    pod_meta = pod.get("metadata") or {}
    if binding.pod_uid != pod_meta.get("uid"):
        raise _reject(
            reasons.MANAGED_SHADOW_POD_MISMATCH,
            what,
            f"bound to Pod UID {binding.pod_uid}, not {pod_meta.get('uid')}",
        )
    node = (pod.get("spec") or {}).get("nodeName")
    if binding.node_name != node:
        raise _reject(
            reasons.MANAGED_SHADOW_NODE_MISMATCH,
            what,
            f"bound to node {binding.node_name}, Pod runs on {node}",
        )
    if meta.get("namespace") != pod_meta.get("namespace"):
        raise _reject(
            reasons.MANAGED_SHADOW_NAMESPACE_MISMATCH,
            what,
            f"a shadow must live in the Pod namespace {pod_meta.get('namespace')}",
        )


def _check_owner(meta: Mapping[str, Any], pod: Mapping[str, Any], binding: Binding, what: str) -> None:
    """The shadow is this Pod's, on its node and in its namespace, protected and not going away."""
    _check_bound_pod(meta, pod, binding, what)
    _check_protected_owner(meta, (pod.get("metadata") or {}).get("uid"), what)
    if meta.get("deletionTimestamp"):
        raise _reject(
            reasons.MANAGED_SHADOW_TERMINATING, what, f"it is being deleted since {meta['deletionTimestamp']}"
        )
    if keys.RESOURCE_NAME_ANNOTATION in (meta.get("annotations") or {}):
        raise _reject(
            reasons.MANAGED_SHADOW_HAS_RESOURCE_NAME,
            what,
            f"annotation {keys.RESOURCE_NAME_ANNOTATION} must be absent",
        )


def _check_protected_owner(meta: Mapping[str, Any], uid: object, what: str, name: str | None = None) -> None:
    """Exactly one Pod ownerReference, to `uid` (and `name` when given), and the protection finalizer."""
    owners = [
        (o.get("uid"), o.get("name") if name is not None else None)
        for o in meta.get("ownerReferences") or []
        if o.get("kind") == "Pod" and o.get("apiVersion") == "v1"
    ]
    if owners != [(uid, name)]:
        to = f" to {name}" if name is not None else ""
        raise _reject(
            reasons.MANAGED_SHADOW_OWNER_MISMATCH,
            what,
            f"needs exactly one Pod ownerReference{to} with UID {uid}",
        )
    if keys.PROTECTION_FINALIZER not in (meta.get("finalizers") or []):
        raise _reject(
            reasons.MANAGED_SHADOW_UNPROTECTED, what, f"finalizer {keys.PROTECTION_FINALIZER} is missing"
        )


def _check_config(config: bytes, binding: Binding, what: str) -> None:
    """spec.config is the static sriov config the driver rendered for the bound VF, to the byte."""
    pci = _static_sriov_pci(config, what)
    if pci != binding.pci_address:
        raise _reject(
            reasons.MANAGED_SHADOW_PCI_MISMATCH,
            what,
            f"config deviceID {pci} differs from bound PCI {binding.pci_address}",
        )
    if config_sha256(config) != binding.config_sha256:
        raise _reject(
            reasons.MANAGED_SHADOW_CONFIG_HASH_MISMATCH,
            what,
            "spec.config bytes differ from what the driver rendered",
        )


def _check_registered(registry: Registry, meta: Mapping[str, Any], binding: Binding, what: str) -> None:
    """The Pod's registry lists this binding once, naming this shadow with the binding's hash and interface."""
    entries = [e for e in registry.entries if e.attachment_id == binding.attachment_id]
    if len(entries) != 1:
        raise _reject(
            reasons.MANAGED_SHADOW_NOT_REGISTERED,
            what,
            f"Pod registry lists attachment {binding.attachment_id} {len(entries)} times",
        )
    entry = entries[0]
    if (entry.namespace, entry.name) != (
        meta.get("namespace"),
        meta.get("name"),
    ) or entry.uid != meta.get("uid"):
        raise _reject(
            reasons.MANAGED_SHADOW_REGISTRY_MISMATCH,
            what,
            f"registry records {entry.namespace}/{entry.name} UID {entry.uid}, shadow UID is {meta.get('uid')}",
        )
    if entry.config_sha256 != binding.config_sha256 or entry.interface != binding.interface:
        raise _reject(
            reasons.MANAGED_SHADOW_REGISTRY_MISMATCH,
            what,
            "registry hash or interface disagrees with the binding",
        )
