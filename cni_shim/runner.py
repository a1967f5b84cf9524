"""libcni semantics for running one delegate network: stdin injection, chaining, result cache.

Orchestration only: plugin processes run through the injected Executor and delegate results
persist through the injected CacheStore.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping, Sequence

from cni_shim import reasons
from cni_shim.core import jsonbytes, results, versions
from cni_shim.core.network import Network
from cni_shim.errors import INCOMPATIBLE_VERSION, CniError
from sriov_lib import quickjson
from sriov_lib.rawjson import JsonObject
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.ports import CacheStore, Executor

    Json = dict[str, Any]


class RuntimeConf(TypedTuple):
    """libcni's RuntimeConf: everything that identifies one delegate invocation besides its config."""

    container_id: str
    netns: str
    ifname: str
    cni_args: tuple[tuple[str, str], ...]
    capability_args: Mapping[str, Any]
    search_path: tuple[str, ...]
    base_env: Mapping[str, str] = {}


def cache_key(network_name: str, container_id: str, ifname: str) -> str:
    return f"{network_name}-{container_id}-{ifname}"


def plugin_env(command: str, rt: RuntimeConf) -> dict[str, str]:
    env = dict(rt.base_env)
    env.update(
        CNI_COMMAND=command,
        CNI_CONTAINERID=rt.container_id,
        CNI_NETNS=rt.netns,
        CNI_ARGS=";".join(f"{k}={v}" for k, v in rt.cni_args),
        CNI_IFNAME=rt.ifname,
        CNI_PATH=":".join(rt.search_path),
    )
    return env


def plugin_stdin(
    net: Network,
    plugin: JsonObject,
    version: str,
    capability_args: Mapping[str, Any],
    *,
    prev_result: Json | None = None,
    extra: Mapping[str, Any] | None = None,
) -> bytes:
    conf: dict[str, Any] = dict(plugin)
    conf["name"] = net.name
    conf["cniVersion"] = version
    caps = plugin.get("capabilities")
    if isinstance(caps, dict):
        runtime = {k: capability_args[k] for k, on in caps.items() if on is True and k in capability_args}
        if runtime:
            conf["runtimeConfig"] = runtime
    if prev_result is not None:
        conf["prevResult"] = results.convert(prev_result, version)
    if extra:
        conf.update(extra)
    return jsonbytes.dumps_sorted(conf).encode()


def _describe(net: Network, plugin: JsonObject, verb: str, err: CniError) -> CniError:
    if not net.conflist:
        return err
    name = f' name="{plugin["name"]}"' if isinstance(plugin.get("name"), str) and plugin["name"] else ""
    return CniError(
        err.reason,
        f'plugin type="{plugin["type"]}"{name} failed ({verb}): {err.message}',
        err.code,
        err.cni_details,
    )


def probe_versions(
    executor: Executor, plugin: str, search_path: Sequence[str], base_env: Mapping[str, str]
) -> tuple[str, ...]:
    env = dict(base_env)
    env.update(CNI_COMMAND="VERSION", CNI_PATH=":".join(search_path))
    for var in ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS"):
        env.pop(var, None)
    out = executor.execute(
        plugin, search_path, env, quickjson.dumps({"cniVersion": versions.CURRENT}).encode()
    )
    try:
        info = quickjson.loads(out)
        supported = info["supportedVersions"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CniError(
            reasons.DELEGATE_VERSION_UNKNOWN, f"plugin {plugin!r} gave no usable VERSION answer: {exc}"
        ) from exc
    if not isinstance(supported, list):
        raise CniError(
            reasons.DELEGATE_VERSION_UNKNOWN, f"plugin {plugin!r} VERSION supportedVersions is not a list"
        )
    return tuple(str(v) for v in supported)


def negotiate(net: Network, fallback_version: str, supported_by: Mapping[str, Sequence[str]]) -> str:
    """The version this delegate will be spoken to in: its own declared one(s), never one a plugin lacks."""
    candidates = [v for v in net.candidate_versions if v] or [fallback_version or "0.1.0"]
    common: set[str] = set(versions.SUPPORTED)
    for plugin in net.plugins:
        common &= set(supported_by[str(plugin["type"])])
    chosen = versions.select(candidates, common)
    if chosen is None:
        raise CniError(
            reasons.INCOMPATIBLE_DELEGATE_VERSION,
            f"delegate network {net.name!r} declares cniVersion {candidates} but its plugins "
            f"{[str(p['type']) for p in net.plugins]} only all support {sorted(common, key=versions.parse)}; "
            "set a cniVersion every plugin of that network supports",
            INCOMPATIBLE_VERSION,
        )
    return chosen


class Runner:
    """Runs ADD/DEL/CHECK/STATUS/GC for delegate networks on behalf of one shim invocation."""

    def __init__(self, executor: Executor, store: CacheStore) -> None:
        self._executor = executor
        self._store = store

    def _exec(self, plugin: JsonObject, rt: RuntimeConf, command: str, stdin: bytes) -> bytes:
        return self._executor.execute(str(plugin["type"]), rt.search_path, plugin_env(command, rt), stdin)

    def add(self, net: Network, version: str, rt: RuntimeConf) -> Json:
        prev: Json | None = None
        for plugin in net.plugins:
            stdin = plugin_stdin(net, plugin, version, rt.capability_args, prev_result=prev)
            try:
                out = self._exec(plugin, rt, "ADD", stdin)
                prev = results.to_current(_decode_result(out), version)
            except CniError as err:
                raise _describe(net, plugin, "add", err) from err
        assert prev is not None  # a Network always has at least one plugin
        self._store.save_result(
            cache_key(net.name, rt.container_id, rt.ifname), self._cache_doc(net, rt, prev, version)
        )
        return prev

    def _cache_doc(self, net: Network, rt: RuntimeConf, result: Json, version: str) -> bytes:
        doc = {
            "kind": "cniCacheV1",
            "containerId": rt.container_id,
            "config": binascii.b2a_base64(net.raw, newline=False).decode(),
            "ifName": rt.ifname,
            "networkName": net.name,
            "netns": rt.netns,
            "cniArgs": [list(p) for p in rt.cni_args],
            "capabilityArgs": dict(rt.capability_args),
            "result": results.convert(result, version),
        }
        return quickjson.dumps(doc).encode()

    def rewrite_default_routes(
        self, net: Network, version: str, rt: RuntimeConf, gateways: Sequence[str]
    ) -> None:
        """Make the cached result (what DEL and CHECK see) match the replaced default routes."""
        key = cache_key(net.name, rt.container_id, rt.ifname)
        data = self._store.load_result(key)
        if data is None:
            return
        doc = quickjson.loads(data)
        current = results.to_current(doc["result"], version)
        routes = [r for r in current.get("routes", []) if not results.is_default_route(r)]
        routes += [{"dst": "::/0" if ":" in gw else "0.0.0.0/0", "gw": gw} for gw in gateways]
        current["routes"] = routes
        doc["result"] = results.convert(current, version)
        self._store.save_result(key, quickjson.dumps(doc).encode())

    def cached_result(self, net: Network, rt: RuntimeConf, version: str) -> Json | None:
        data = self._store.load_result(cache_key(net.name, rt.container_id, rt.ifname))
        if data is None:
            return None
        try:
            doc = quickjson.loads(data)
            return results.to_current(doc.get("result", doc), version)
        except (ValueError, AttributeError, CniError):
            # An unreadable result cache must not block teardown (libcni >= 1.3 behaviour).
            return None

    def delete(self, net: Network, version: str, rt: RuntimeConf, *, release_ipam: bool = False) -> None:
        """DEL every plugin, last first. With `release_ipam`, each plugin's IPAM plugin gets a DEL
        of its own afterwards: sriov-cni frees its address only through its own cache, which a
        node that lost power between the IPAM ADD and that cache's write never has; an IPAM DEL
        is idempotent (host-local, whereabouts and static free by container ID and interface)."""
        prev = self.cached_result(net, rt, version) if versions.at_least(version, "0.4.0") else None
        for plugin in reversed(net.plugins):
            stdin = plugin_stdin(net, plugin, version, rt.capability_args, prev_result=prev)
            try:
                self._exec(plugin, rt, "DEL", stdin)
                ipam = plugin.get("ipam")
                if (
                    release_ipam
                    and isinstance(ipam, dict)
                    and isinstance(ipam.get("type"), str)
                    and ipam["type"]
                ):
                    self._exec(ipam, rt, "DEL", stdin)
            except CniError as err:
                raise _describe(net, plugin, "delete", err) from err
        self._store.remove_result(cache_key(net.name, rt.container_id, rt.ifname))

    def check(self, net: Network, version: str, rt: RuntimeConf) -> None:
        if net.disable_check or not versions.at_least(version, "0.4.0"):
            return
        prev = self.cached_result(net, rt, version)
        for plugin in net.plugins:
            stdin = plugin_stdin(net, plugin, version, rt.capability_args, prev_result=prev)
            try:
                self._exec(plugin, rt, "CHECK", stdin)
            except CniError as err:
                raise _describe(net, plugin, "check", err) from err

    def status(self, net: Network, version: str, rt: RuntimeConf) -> None:
        if not versions.at_least(version, "1.1.0"):
            return
        for plugin in net.plugins:
            self._exec(plugin, rt, "STATUS", plugin_stdin(net, plugin, version, {}))

    def gc(
        self, net: Network, version: str, rt: RuntimeConf, valid: Sequence[tuple[str, str]]
    ) -> list[CniError]:
        if net.disable_gc or not versions.at_least(version, "1.1.0"):
            return []
        listed = [{"containerID": cid, "ifname": ifname} for cid, ifname in valid]
        extra = {"cni.dev/valid-attachments": listed, "cni.dev/attachments": listed}
        failures = []
        for plugin in net.plugins:
            try:
                self._exec(plugin, rt, "GC", plugin_stdin(net, plugin, version, {}, extra=extra))
            except CniError as err:
                failures.append(_describe(net, plugin, "gc", err))
        return failures


def _decode_result(out: bytes) -> Any:
    try:
        return quickjson.loads(out)
    except ValueError as exc:
        raise CniError(reasons.INVALID_DELEGATE_RESULT, f"failed to unmarshal raw result: {exc}") from exc
