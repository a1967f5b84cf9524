"""Merging the driver's managed selections into a Pod's networks annotation (spec 9: own only what
the registry records, keep every other selection as it was).

Ownership is never inferred from a name prefix: an element is ours only when the registry
annotation records its exact (namespace, name, interface) tuple. Everything else is someone
else's and is re-serialized from its raw JSON object, unknown fields and number text included.
The result is an RFC 6902 patch guarded by `test` operations on the Pod's UID and
resourceVersion, or None when the Pod already says the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from sriov_contract.keys import NETWORKS_ANNOTATION, PROTOCOL_VERSION, REGISTRY_ANNOTATION
from sriov_contract.networks import NetworkSelection, parse_network_selections
from sriov_contract.registry import Registry, RegistryEntry, parse_registry
from sriov_dra.core.errors import (
    ANNOTATION_TOO_LARGE,
    MANAGED_SELECTION_CONFLICT,
    MANUAL_SELECTION_CONFLICT,
    DriverCoreError,
    fail,
)
from sriov_dra.core.template import NamespacedName
from sriov_lib import rawjson
from sriov_lib.rawjson import JsonObject

# Kubernetes' TotalAnnotationSizeLimitB: the sum of all key and value lengths in bytes.
ANNOTATIONS_SIZE_LIMIT: Final = 256 * 1024
_GENERATED_KEYS: Final = frozenset({"name", "namespace", "interface"})

PatchOp = dict[str, Any]
# Parsed annotations by their text. A repair pass checks every Pod of the node each time, and a
# healthy Pod's annotations read the same on every pass; the parsed forms are immutable records
# (their raw JSON objects are only ever read here). About one node's worth of Pods.
_PARSED_PODS: Final = 4096


@lru_cache(maxsize=_PARSED_PODS)
def _registry(text: str) -> Registry:
    return parse_registry(text)


@lru_cache(maxsize=_PARSED_PODS)
def _selections(text: str | None, namespace: str) -> tuple[NetworkSelection, ...]:
    return tuple(parse_network_selections(text, namespace))


@dataclass(frozen=True, slots=True)
class ManagedBinding:
    """A binding the Pod should select: its registry entry and the source NAD it was rendered from."""

    entry: RegistryEntry
    source: NamespacedName


def json_pointer(*tokens: str) -> str:
    """RFC 6901: '~' becomes '~0' before '/' becomes '~1'."""
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


@dataclass(frozen=True, slots=True)
class _PodView:
    uid: str
    resource_version: str
    namespace: str
    annotations: Mapping[str, str] | None

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> _PodView:
        meta = pod.get("metadata") or {}
        return cls(meta["uid"], meta["resourceVersion"], meta["namespace"], meta.get("annotations"))

    def annotation(self, key: str) -> str | None:
        return (self.annotations or {}).get(key)

    def registry(self) -> Registry | None:
        text = self.annotation(REGISTRY_ANNOTATION)
        if text is None:
            return None
        registry = _registry(text)
        if registry.pod_uid != self.uid:
            raise fail(
                MANAGED_SELECTION_CONFLICT,
                f"Pod {self.namespace} ({self.uid}) carries a {REGISTRY_ANNOTATION} registry for Pod "
                f"{registry.pod_uid}; it was copied from another Pod: remove it and let the driver repair",
                pod_uid=self.uid,
            )
        return registry

    def selections(self) -> list[NetworkSelection]:
        return list(_selections(self.annotation(NETWORKS_ANNOTATION), self.namespace))


def _tuple(entry: RegistryEntry) -> tuple[str, str, str | None]:
    return (entry.namespace, entry.name, entry.interface)


def _generated(entry: RegistryEntry) -> JsonObject:
    return JsonObject(name=entry.name, namespace=entry.namespace, interface=entry.interface)


def merge_managed_selections(
    pod: Mapping[str, Any], desired: Sequence[ManagedBinding]
) -> list[PatchOp] | None:
    """Ensure every desired binding is selected exactly once and registered; None when nothing changes.

    `pod` is the live Pod as API JSON (camelCase). `desired` is in plan order. Registered entries of
    other claims and all manual entries are preserved in place.
    """
    view = _PodView.of(pod)
    prior = view.registry()
    entries = {e.attachment_id: e for e in (prior.entries if prior else ())}
    for binding in desired:
        old = entries.get(binding.entry.attachment_id)
        if old is not None and _tuple(old) != _tuple(binding.entry):
            raise _ownership(view, binding.entry, "its registered selection differs from the frozen plan")
        entries[binding.entry.attachment_id] = binding.entry
    registry = Registry(PROTOCOL_VERSION, view.uid, tuple(entries.values()))
    selections = view.selections()
    _check_selections(view, selections, prior, registry, desired)
    present = {s.selection_tuple() for s in selections}
    old_raws = [s.raw for s in selections]
    raws = old_raws + [_generated(e) for e in registry.entries if _tuple(e) not in present]
    return _patch(view, old_raws, raws, registry, prior)


def release_claim_selections(pod: Mapping[str, Any], claim_uid: str) -> list[PatchOp] | None:
    """Drop only `claim_uid`'s registered selections and registry entries; None when it has none."""
    view = _PodView.of(pod)
    prior = view.registry()
    if prior is None:
        return None
    dropped = {_tuple(e) for e in prior.entries if e.claim_uid == claim_uid}
    if not dropped:
        return None
    registry = Registry(
        PROTOCOL_VERSION, view.uid, tuple(e for e in prior.entries if e.claim_uid != claim_uid)
    )
    selections = view.selections()
    raws = [s.raw for s in selections if s.selection_tuple() not in dropped]
    return _patch(view, [s.raw for s in selections], raws, registry, prior)


def _ownership(view: _PodView, entry: RegistryEntry, why: str) -> DriverCoreError:
    return fail(
        MANAGED_SELECTION_CONFLICT,
        f"Pod {view.namespace} ({view.uid}) managed selection {entry.namespace}/{entry.name}@{entry.interface}: "
        f"{why}; managed entries are written only by the driver: restore them or recreate the Pod",
        pod_uid=view.uid,
        name=entry.name,
    )


def _check_selections(
    view: _PodView,
    selections: Iterable[NetworkSelection],
    prior: Registry | None,
    registry: Registry,
    desired: Sequence[ManagedBinding],
) -> None:
    # Only entries already registered prove ownership; a planned name written by someone else is a collision.
    owned = {_tuple(e): e for e in (prior.entries if prior else ())}
    by_name = {(e.namespace, e.name): e for e in registry.entries}
    sources = {b.source: b.entry for b in desired}
    seen: set[tuple[str, str, str | None]] = set()
    for sel in selections:
        key = sel.selection_tuple()
        entry = owned.get(key)
        if entry is not None:
            if key in seen:
                raise _ownership(view, entry, "it is selected more than once")
            if set(sel.raw) != _GENERATED_KEYS:
                raise _ownership(view, entry, f"it was edited to carry {sorted(sel.raw)}")
            seen.add(key)
            continue
        collision = by_name.get((sel.namespace, sel.name))
        if collision is not None:
            raise _ownership(
                view, collision, f"another selection names its shadow with interface {sel.interface!r}"
            )
        managed = sources.get(NamespacedName(sel.namespace, sel.name))
        if managed is not None:
            raise fail(
                MANUAL_SELECTION_CONFLICT,
                f"Pod {view.namespace} ({view.uid}) selects NAD {sel.namespace}/{sel.name} by hand, and the "
                f"driver also attaches it automatically as {managed.interface}; remove that entry from "
                f"{NETWORKS_ANNOTATION}: the allocated VF already gets this network",
                pod_uid=view.uid,
                selection=rawjson.dumps(sel.raw),
            )


def _patch(
    view: _PodView,
    old_raws: list[JsonObject],
    raws: list[JsonObject],
    registry: Registry,
    prior: Registry | None,
) -> list[PatchOp] | None:
    """The annotation patch from the Pod's selections as parsed (`old_raws`) to `raws` and `registry`."""
    changes: dict[str, str | None] = {}
    if raws != old_raws:
        changes[NETWORKS_ANNOTATION] = rawjson.dumps(list(raws)) if raws else None
    if registry.entries != (prior.entries if prior else ()):
        changes[REGISTRY_ANNOTATION] = registry.to_json() if registry.entries else None
    if not changes:
        return None
    annotations = dict(view.annotations or {})
    for key, value in changes.items():
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
    _check_size(view, annotations)
    ops: list[PatchOp] = [
        {"op": "test", "path": "/metadata/uid", "value": view.uid},
        {"op": "test", "path": "/metadata/resourceVersion", "value": view.resource_version},
    ]
    if view.annotations is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
        return ops
    for key, value in changes.items():
        path = json_pointer("metadata", "annotations", key)
        if value is None:
            ops.append({"op": "remove", "path": path})
        else:
            ops.append({"op": "replace" if key in view.annotations else "add", "path": path, "value": value})
    return ops


def _check_size(view: _PodView, annotations: Mapping[str, str]) -> None:
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > ANNOTATIONS_SIZE_LIMIT:
        raise fail(
            ANNOTATION_TOO_LARGE,
            f"Pod {view.namespace} ({view.uid}) annotations would total {size} bytes, over the Kubernetes "
            f"limit of {ANNOTATIONS_SIZE_LIMIT}; request fewer VFs per Pod or shrink other annotations",
            pod_uid=view.uid,
            size=size,
        )
