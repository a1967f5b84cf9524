"""A shadow's frozen CNI configuration: a source NAD's config rendered for one VF (spec 7: inject
the PCI address, lose nothing else). `sriov-dra render` (sriov_dra.cli.render) runs the same code.

The output must be what the administrator wrote plus exactly one change, the allocated PCI
address in the one sriov plugin. Everything else (number text, unknown fields, the IPAM
subtree, whether an optional key is absent or empty) decides which network and which address
pool a delegate uses, so it is carried through the lossless decoder untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sriov_contract.identity import config_sha256
from sriov_dra.core.errors import PCI_ADDRESS_MISMATCH, UNSUPPORTED_CNI_CONFIG, DriverCoreError, fail
from sriov_dra.core.pci import normalize_pci_address
from sriov_lib import rawjson
from sriov_lib.rawjson import JsonObject

SRIOV_TYPE: Final = "sriov"
# Metaplugins that only adjust the interface sriov created; extend with plugin-specific tests.
# `rdma` moves the VF's RDMA device into the Pod's namespace with its netdev (a node in exclusive
# RDMA netns mode); it finds the device by the same deviceID, which rendering gives it.
RDMA_TYPE: Final = "rdma"
ALLOWED_METAPLUGINS: Final = frozenset({"tuning", RDMA_TYPE})
# sriov-cni needs a result that can carry interfaces, so the pre-0.3.0 versions cannot work.
SUPPORTED_CNI_VERSIONS: Final = frozenset({"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"})
CRITICAL_KEYS: Final = frozenset({"type", "plugins", "name", "deviceID", "pciBusID", "ipam"})

# libcni's network-name rule.
_CNI_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.\-]*")
_DELEGATING_PLUGINS = frozenset({"multus", "multus-shim", "cni-shim"})
_DEVICE_PLUGINS = frozenset(
    {
        "host-device",
        "macvlan",
        "ipvlan",
        "bridge",
        "vlan",
        "ptp",
        "bond",
        "dummy",
        "tap",
        "vrf",
        "ib-sriov",
        "ovs",
    }
)


@dataclass(frozen=True, slots=True)
class RenderedConfig:
    """The frozen shadow configuration; `config` is exactly what the shadow's spec.config holds."""

    config: bytes
    cni_name: str
    plugin_index: int | None
    """Position of the sriov entry in `plugins`, or None for a single-plugin configuration."""
    plugin_type: str
    pci_address: str
    sha256: str


def render_shadow_config(source_nad: Mapping[str, Any], allocated_pci: str) -> RenderedConfig:
    """Render `source_nad` (a NAD object as a plain mapping) for the VF at `allocated_pci`."""
    pci = normalize_pci_address(allocated_pci)
    metadata = _mapping(source_nad.get("metadata"))
    nad_name = metadata.get("name")
    ref = f"{metadata.get('namespace', '')}/{nad_name}"
    if not isinstance(nad_name, str) or not nad_name:
        raise _unsupported(ref, "metadata.name is missing", "render the NAD object as stored in the API")
    config_text = _mapping(source_nad.get("spec")).get("config")
    if not isinstance(config_text, str) or not config_text:
        raise _unsupported(
            ref, "spec.config is empty or absent (file-backed)", "inline the CNI JSON in spec.config"
        )
    try:
        root = rawjson.loads(config_text)
    except rawjson.RawJsonError as exc:
        raise _unsupported(ref, f"spec.config is not valid JSON ({exc})", "fix the JSON") from exc
    if not isinstance(root, JsonObject):
        raise _unsupported(ref, "spec.config must be a JSON object", "wrap the configuration in an object")
    _reject_duplicates(ref, root, "the configuration root")
    _check_cni_version(ref, root)
    index, plugin = _select_sriov_plugin(ref, root)
    where = "the sriov plugin" if index is None else f"plugins[{index}]"
    _inject_pci(ref, plugin, where, pci)
    chain = root.get("plugins")
    for i, entry in enumerate(chain if isinstance(chain, list) else []):
        if isinstance(entry, JsonObject) and entry.get("type") == RDMA_TYPE:
            _inject_pci(ref, entry, f"plugins[{i}]", pci)
    _check_ipam(ref, plugin, where)
    name = _materialize_name(ref, root, nad_name)
    config = rawjson.dumps(root).encode()
    return RenderedConfig(
        config=config,
        cni_name=name,
        plugin_index=index,
        plugin_type=SRIOV_TYPE,
        pci_address=pci,
        sha256=config_sha256(config),
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _unsupported(ref: str, why: str, fix: str) -> DriverCoreError:
    return fail(
        UNSUPPORTED_CNI_CONFIG,
        f"NetworkAttachmentDefinition {ref} cannot be a managed SR-IOV template: {why}; {fix}",
        nad=ref,
    )


def _reject_duplicates(ref: str, obj: JsonObject, where: str) -> None:
    dupes = sorted(obj.duplicate_keys & CRITICAL_KEYS)
    if dupes:
        raise _unsupported(ref, f"{where} repeats the key(s) {dupes}", "keep a single occurrence of each")


def _string_field(ref: str, obj: JsonObject, key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _unsupported(ref, f"{key} in {where} must be a string", f"write {key} as a JSON string")
    return value


def _check_cni_version(ref: str, root: JsonObject) -> None:
    version = _string_field(ref, root, "cniVersion", "the configuration root")
    if version not in SUPPORTED_CNI_VERSIONS:
        raise _unsupported(
            ref,
            f"cniVersion {version!r} is not supported with sriov-cni",
            f"set cniVersion to one of {sorted(SUPPORTED_CNI_VERSIONS)}",
        )


def _select_sriov_plugin(ref: str, root: JsonObject) -> tuple[int | None, JsonObject]:
    if "plugins" not in root:
        plugin_type = _string_field(ref, root, "type", "the configuration root")
        if plugin_type != SRIOV_TYPE:
            raise _unsupported(ref, f"single-plugin type is {plugin_type!r}", "use type sriov")
        return None, root
    if "type" in root:
        raise _unsupported(ref, "the root has both type and plugins", "remove the root type of the conflist")
    plugins = root["plugins"]
    if not isinstance(plugins, list) or not plugins:
        raise _unsupported(ref, "plugins must be a non-empty list", "list the sriov plugin first")
    entries: list[JsonObject] = []
    for i, entry in enumerate(plugins):
        if not isinstance(entry, JsonObject):
            raise _unsupported(ref, f"plugins[{i}] is not an object", "make every plugin entry an object")
        if i == 0:
            _reject_duplicates(ref, entry, "plugins[0]")
        _check_plugin_type(ref, i, _string_field(ref, entry, "type", f"plugins[{i}]"))
        entries.append(entry)
    return 0, entries[0]


def _check_plugin_type(ref: str, index: int, plugin_type: str | None) -> None:
    if index == 0:
        if plugin_type != SRIOV_TYPE:
            raise _unsupported(ref, f"plugins[0] has type {plugin_type!r}", "put the one sriov plugin first")
        return
    if plugin_type in ALLOWED_METAPLUGINS:
        return
    if plugin_type == SRIOV_TYPE:
        why = "a second sriov plugin would need a second VF"
    elif plugin_type in _DELEGATING_PLUGINS:
        why = f"nested delegating plugin {plugin_type!r}"
    elif plugin_type in _DEVICE_PLUGINS:
        why = f"device-creating plugin {plugin_type!r} needs another binding model"
    else:
        why = f"plugin type {plugin_type!r} is not an allowed metaplugin"
    raise _unsupported(
        ref, f"plugins[{index}]: {why}", f"follow sriov only with {sorted(ALLOWED_METAPLUGINS)}"
    )


def _inject_pci(ref: str, plugin: JsonObject, where: str, pci: str) -> None:
    for key in ("deviceID", "pciBusID"):
        existing = _string_field(ref, plugin, key, where)
        if existing and existing.lower() != pci:
            raise fail(
                PCI_ADDRESS_MISMATCH,
                f"NetworkAttachmentDefinition {ref} pins {key} {existing!r} in {where}, but the allocated "
                f"VF is {pci}; remove {key} from the template so the driver can set it",
                nad=ref,
                key=key,
            )
    plugin["deviceID"] = pci
    if "pciBusID" in plugin:
        plugin["pciBusID"] = pci


def _check_ipam(ref: str, plugin: JsonObject, where: str) -> None:
    ipam = plugin.get("ipam")
    if ipam is None:
        return
    if not isinstance(ipam, JsonObject):
        raise _unsupported(ref, f"ipam in {where} must be an object", "write ipam as a JSON object")
    node_slice = ipam.get("node_slice_size")
    if node_slice not in (None, ""):
        raise _unsupported(
            ref,
            f"ipam.node_slice_size {rawjson.dumps(node_slice)} enables Whereabouts fast node-slice mode",
            "remove node_slice_size; node-slice mode is not supported for managed shadows",
        )


def _materialize_name(ref: str, root: JsonObject, nad_name: str) -> str:
    # The source NAD's name, never the shadow's: host-local keys its allocation store on it.
    name = _string_field(ref, root, "name", "the configuration root")
    if name:
        if not _CNI_NAME.fullmatch(name):
            raise _unsupported(ref, f"CNI name {name!r} is not valid", "use letters, digits, '_', '.', '-'")
        return name
    root["name"] = nad_name
    return nad_name
