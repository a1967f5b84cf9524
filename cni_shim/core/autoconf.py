"""Multus thick's generated `00-multus.conf` (`multusConfigFile: auto`), as pure functions.

Mirrors `pkg/server/config` (generator.go, manager.go) of Multus v4: the daemon config is decoded
into Multus's MultusConf (keys matched case-insensitively, as Go does); the primary CNI config is
`multusMasterCNI` or the first `.conf`/`.conflist` of `multusAutoconfigDir` by name that does not
start with `00-multus`; a top-level cniVersion >= 0.4.0 refuses a primary below 0.4.0; the output
is MultusConf marshalled by Go (struct key order, empty values left out, Go's string escaping)
with `name` forced to `multus-cni-network` (or the primary's with `overrideNetworkName`),
`clusterNetwork` the primary's path, `capabilities` the configured ones plus every capability the
primary enables (top level, or each plugin of a conflist), and the daemon-only keys cleared.

Unlike Multus, capabilities are recomputed from the current primary on every regeneration (Multus
keeps adding to one map, so a capability the primary dropped stays), and malformed capability
values are skipped instead of crashing the daemon.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cni_shim import reasons
from sriov_contract.errors import ReasonedError

MULTUS_FILE = "00-multus.conf"
DEFAULT_NAME = "multus-cni-network"
DEFAULT_TYPE = "multus-shim"
DEFAULT_CNI_CONFIG_DIR = "/etc/cni/net.d"
AUTO = "auto"
FIND_TRIES = 120  # findMasterPlugin: one look a second
_V040 = (0, 4, 0)

# MultusConf's fields in struct order: (JSON key, kind). Kinds: s string, b bool, m map of bools,
# o logOptions. cniVersion, name and type are always written; the rest only when not empty.
_FIELDS: tuple[tuple[str, str], ...] = (
    ("binDir", "s"),
    ("capabilities", "m"),
    ("cniVersion", "s"),
    ("logFile", "s"),
    ("logLevel", "s"),
    ("logToStderr", "b"),
    ("logOptions", "o"),
    ("name", "s"),
    ("clusterNetwork", "s"),
    ("namespaceIsolation", "b"),
    ("globalNamespaces", "s"),
    ("readinessindicatorfile", "s"),
    ("type", "s"),
    ("cniDir", "s"),
    ("cniConfigDir", "s"),
    ("auxiliaryCNIChainName", "s"),
    ("daemonSocketDir", "s"),
    ("multusConfigFile", "s"),
    ("multusMasterCNI", "s"),
    ("multusAutoconfigDir", "s"),
    ("forceCNIVersion", "b"),
    ("overrideNetworkName", "b"),
)
_ALWAYS = frozenset({"cniVersion", "name", "type"})
# Generate() clears these: they configure the daemon, not the shim.
_CLEARED = frozenset(
    {
        "cniConfigDir",
        "multusConfigFile",
        "multusAutoconfigDir",
        "multusMasterCNI",
        "forceCNIVersion",
        "readinessindicatorfile",
    }
)
_LOG_OPTIONS = (("maxAge", int), ("maxSize", int), ("maxBackups", int), ("compress", bool))


def _error(message: str) -> ReasonedError:
    return ReasonedError(reasons.AUTOCONF_FAILED, message)


@dataclass(frozen=True)
class Settings:
    """The daemon config as Multus's MultusConf decodes it (defaults applied)."""

    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.values.get(key)

    @property
    def auto(self) -> bool:
        return self.values.get("multusConfigFile") == AUTO

    @property
    def config_dir(self) -> str:
        return str(self.values.get("cniConfigDir") or "")

    @property
    def autoconfig_dir(self) -> str:
        return str(self.values.get("multusAutoconfigDir") or "")

    @property
    def output_path(self) -> str:
        return posixpath.join(self.config_dir, MULTUS_FILE)

    @property
    def readiness_file(self) -> str:
        return str(self.values.get("readinessindicatorfile") or "")


def _typed(key: str, kind: str, value: Any) -> Any:
    ok = {
        "s": isinstance(value, str),
        "b": isinstance(value, bool),
        "m": isinstance(value, dict) and all(isinstance(v, bool) for v in value.values()),
        "o": isinstance(value, dict),
    }[kind]
    if not ok:
        raise ReasonedError(
            reasons.DAEMON_CONFIG_MALFORMED,
            f"failed to unmarshall the daemon configuration: {key} has the wrong type ({type(value).__name__})",
        )
    if kind == "o":
        options = {k.lower(): v for k, v in value.items()}
        out = {}
        for name, want in _LOG_OPTIONS:
            item = options.get(name.lower())
            if item is None:
                continue
            if not isinstance(item, want) or (want is int and isinstance(item, bool)):
                raise ReasonedError(
                    reasons.DAEMON_CONFIG_MALFORMED,
                    f"failed to unmarshall the daemon configuration: logOptions.{name} has the wrong type",
                )
            out[name] = item
        return out
    return dict(value) if kind == "m" else value


def settings(raw: Mapping[str, Any]) -> Settings:
    """ParseMultusConfig: Multus's defaults, then the file's keys (any case); null keeps a default."""
    values: dict[str, Any] = {
        "multusConfigFile": AUTO,
        "type": DEFAULT_TYPE,
        "capabilities": {},
        "cniConfigDir": DEFAULT_CNI_CONFIG_DIR,
    }
    by_lower = {key.lower(): (key, kind) for key, kind in _FIELDS}
    for key, value in raw.items():
        known = by_lower.get(str(key).lower())
        if known is None or value is None:
            continue
        values[known[0]] = _typed(known[0], known[1], value)
    values["name"] = DEFAULT_NAME
    return Settings(values)


def primary_name(files: Iterable[str]) -> str | None:
    """findMasterPlugin's pick: the first `.conf`/`.conflist` by name not starting with `00-multus`."""
    found = sorted(
        name
        for name in files
        if not name.startswith("00-multus") and posixpath.splitext(name)[1] in (".conf", ".conflist")
    )
    return found[0] if found else None


def _semver(text: str) -> tuple[int, int, int] | None:
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() and (p == "0" or not p.startswith("0")) for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def load_primary(data: bytes, path: str) -> Any:
    """The primary CNI config's JSON, as primaryCNIData decodes it."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise _error(
            f"failed to access the primary CNI configuration from {path}: "
            f"failed to unmarshall primary CNI config: {exc}"
        ) from exc


def check_version(conf: Settings, primary: Any) -> None:
    """CheckVersionCompatibility; the daemon refuses to start (Multus exits 2) when it fails."""
    top = conf.get("cniVersion") or ""
    top_version = _semver(top)
    if top_version is None:
        raise _refused("couldn't get top level cni version")
    if top_version < _V040:
        return
    version = primary.get("cniVersion") if isinstance(primary, dict) else None
    if not isinstance(version, str):
        raise _refused("couldn't get cni version of delegate")
    parsed = _semver(version)
    if parsed is None:
        raise _refused(f"invalid semantic version {version!r} of delegate")
    if parsed < _V040:
        raise _refused(f"delegate cni version is {version} while top level cni version is {top}")


def _refused(cause: str) -> ReasonedError:
    return _error(f"failed to load the primary CNI configuration as a multus delegate with error '{cause}'")


def network_name(primary: Any) -> str:
    """overrideNetworkName: the primary's own network name."""
    name = primary.get("name") if isinstance(primary, dict) else None
    if name is None:
        raise _error("could not override the network name: failed to access delegate CNI plugin name")
    if not isinstance(name, str) or not name:
        raise _error(
            "could not override the network name: the primary CNI Configuration does not feature the network name"
        )
    return name


def _enabled(plugin: Any) -> list[str]:
    caps = plugin.get("capabilities") if isinstance(plugin, dict) else None
    if not isinstance(caps, dict):
        return []
    return [name for name, on in caps.items() if on is True]


def capabilities(primary: Any) -> list[str]:
    """setCapabilities: each plugin's enabled capabilities for a conflist, else the top level's."""
    plugins = primary.get("plugins") if isinstance(primary, dict) else None
    if isinstance(plugins, list) and plugins:
        return [name for plugin in plugins for name in _enabled(plugin)]
    return _enabled(primary)


_GO_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json(value: Any) -> str:
    """encoding/json.Marshal's text: compact, map keys sorted, HTML-safe string escapes."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, str):
        return (
            '"' + "".join(_GO_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if c < " " else c) for c in value) + '"'
        )
    return json.dumps(value)


def generate(conf: Settings, primary_path: str, primary: Any) -> str:
    """The 00-multus.conf text Multus writes for this primary (check_version passed)."""
    values = dict(conf.values)
    values["clusterNetwork"] = primary_path
    caps = dict(values.get("capabilities") or {})
    caps.update(dict.fromkeys(capabilities(primary), True))
    values["capabilities"] = caps
    if values.get("overrideNetworkName"):
        values["name"] = network_name(primary)
    parts = []
    for key, _kind in _FIELDS:
        value = None if key in _CLEARED else values.get(key)
        if key in _ALWAYS:
            parts.append(f"{go_json(key)}:{go_json(value or '')}")
        elif value:
            parts.append(f"{go_json(key)}:{go_json(value)}")
    return "{" + ",".join(parts) + "}"


def cluster_network(conf: Settings, name: str) -> str:
    """filepath.Join(multusAutoconfigDir, name)."""
    return posixpath.normpath(posixpath.join(conf.autoconfig_dir, name))


def force_version(data: bytes, version: str, path: str) -> bytes:
    """forceCNIVersion: the primary file rewritten (Go re-marshals it) with the top-level cniVersion."""
    primary = load_primary(data, path)
    if not isinstance(primary, dict):
        raise _error(f"failed to unmarshall cni config {path}: not a JSON object")
    primary["cniVersion"] = version
    return go_json(primary).encode()
