"""One delegate network as libcni sees it: a single plugin config or a conflist, from exact bytes."""

from __future__ import annotations

from cni_shim.errors import config_error
from sriov_lib import rawjson
from sriov_lib.rawjson import JsonObject, JsonValue
from sriov_lib.typedtuple import TypedTuple


class Network(TypedTuple):
    name: str
    version: str
    candidate_versions: tuple[str, ...]
    plugins: tuple[JsonObject, ...]
    conflist: bool
    disable_check: bool
    disable_gc: bool
    raw: bytes

    @property
    def first_type(self) -> str:
        return str(self.plugins[0].get("type", ""))


def decode(raw: bytes, what: str) -> JsonObject:
    try:
        value = rawjson.loads(raw)
    except (rawjson.RawJsonError, RecursionError) as exc:
        raise config_error(f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(value, JsonObject):
        raise config_error(f"{what} must be a JSON object")
    return value


def _flag(obj: JsonObject, key: str) -> bool:
    value = obj.get(key)
    return value is True or value == "true"


def _str(obj: JsonObject, key: str, what: str) -> str:
    value: JsonValue = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise config_error(f"{what}: {key} must be a string")
    return value


# Multus's delegate loader names itself in its errors ("... 'plugin' field" is its spelling).
_LOADER = "LoadDelegateNetConf: failed with: LoadDelegateNetConfList: "


# Parsed networks by their exact bytes. A request parses each delegate config once and carries
# the Network from there (candidate, plan, the verb), but the daemon meets the same configs again
# on every Pod's ADD and DEL; a Network is never modified after parsing, so its plugins can be
# shared. Only successes are kept: a failure's message names the `what` of its caller.
_PARSED: dict[bytes, Network] = {}
_PARSED_MAX = 256


def parse(raw: bytes, what: str) -> Network:
    """Multus's loader rule: a non-empty root `type` means a single plugin, otherwise `plugins`."""
    net = _PARSED.get(raw)
    if net is None:
        net = _parse(raw, what)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()  # configs change rarely; a full map is a burst of distinct ones
        _PARSED[raw] = net
    return net


def _parse(raw: bytes, what: str) -> Network:
    obj = decode(raw, what)
    versions_value = obj.get("cniVersions") or []
    if not isinstance(versions_value, list) or not all(isinstance(v, str) for v in versions_value):
        raise config_error(f"{what}: cniVersions must be a list of strings")
    if _str(obj, "type", what):
        plugins: tuple[JsonObject, ...] = (obj,)
        conflist = False
    else:
        listed = obj.get("plugins")
        if not isinstance(listed, list) or not listed:
            raise config_error(f"{what}: {_LOADER}delegate must have the 'type' or 'plugin' field")
        if not all(
            isinstance(p, JsonObject) and isinstance(p.get("type"), str) and p["type"] for p in listed
        ):
            raise config_error(f"{what}: {_LOADER}a plugin delegate must have the 'type' field")
        plugins = tuple(p for p in listed if isinstance(p, JsonObject))
        conflist = True
    version = _str(obj, "cniVersion", what)
    return Network(
        name=_str(obj, "name", what),
        version=version,
        candidate_versions=tuple(dict.fromkeys([version, *(str(v) for v in versions_value)])),
        plugins=plugins,
        conflist=conflist,
        disable_check=_flag(obj, "disableCheck"),
        disable_gc=_flag(obj, "disableGC"),
        raw=raw,
    )
