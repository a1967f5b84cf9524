"""An in-memory API server for Pods and NADs with the semantics the managed flow depends on:
resourceVersions, UID preconditions, JSON Patch `test` failures as 422, finalizers holding a
deleted object, AlreadyExists as 409, and injectable faults (including "applied, response lost")."""

from __future__ import annotations

import copy
import itertools
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NODE_UID_LABEL
from sriov_dra.apierrors import api_error

Obj = dict[str, Any]
T = TypeVar("T")


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(obj: Obj, ops: list[Obj]) -> Obj:
    out = copy.deepcopy(obj)
    for op in ops:
        *parents, last = [_unescape(t) for t in op["path"].split("/")[1:]]
        target = out
        for t in parents:
            target = target[t]
        kind = op["op"]
        if kind == "test":
            if target.get(last) != op["value"]:
                raise api_error(422, "PATCH", "object", f"test of {op['path']} failed")
        elif kind in ("add", "replace"):
            if kind == "replace" and last not in target:
                raise api_error(422, "PATCH", "object", f"replace of missing {op['path']}")
            target[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            if last not in target:
                raise api_error(422, "PATCH", "object", f"remove of missing {op['path']}")
            del target[last]
        else:
            raise AssertionError(kind)
    return out


class Fault:
    """One injected failure for a (verb, kind); `applied` performs the call before failing."""

    def __init__(self, status: int, *, applied: bool = False, times: int = 1, after: int = 0) -> None:
        self.status, self.applied, self.times, self.after = status, applied, times, after


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.faults: dict[tuple[str, str], list[Fault]] = {}
        self.writes: list[tuple[str, str, str]] = []
        self.reads: list[tuple[str, str, str]] = []
        self.claim_namespaces_listed: list[str] = []
        self.shadow_namespaces_listed: list[str] = []
        """Every get and list call, as (verb, kind, name)."""
        self._rv = itertools.count(1)
        self._lock = threading.RLock()

    # -- helpers for tests ---------------------------------------------------------------------

    def put(self, kind: str, obj: Obj) -> Obj:
        with self._lock:
            md = obj.setdefault("metadata", {})
            md.setdefault("uid", str(uuid.uuid4()))
            md["resourceVersion"] = str(next(self._rv))
            self.objects[(kind, md["namespace"], md["name"])] = copy.deepcopy(obj)
            return copy.deepcopy(obj)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        with self._lock:
            obj = self.objects.get((kind, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def stored(self, kind: str, namespace: str, name: str) -> Obj:
        """A copy of an object the test expects to exist."""
        obj = self.get(kind, namespace, name)
        assert obj is not None, f"{kind} {namespace}/{name} is not stored"
        return obj

    def fail(self, verb: str, kind: str, fault: Fault) -> None:
        self.faults.setdefault((verb, kind), []).append(fault)

    def _fault(self, verb: str, kind: str) -> Fault | None:
        queue = self.faults.get((verb, kind)) or []
        if not queue:
            return None
        fault = queue[0]
        if fault.after > 0:
            fault.after -= 1
            return None
        fault.times -= 1
        if fault.times <= 0:
            queue.pop(0)
        return fault

    def _call(self, verb: str, kind: str, name: str, action: Callable[[], T]) -> T:
        with self._lock:
            fault = self._fault(verb, kind)
            if fault is not None and not fault.applied:
                raise api_error(fault.status, verb, f"{kind} {name}")
            result = action()
            if verb in ("get", "list"):
                self.reads.append((verb, kind, name))
            else:
                self.writes.append((verb, kind, name))
            if fault is not None:
                raise api_error(fault.status, verb, f"{kind} {name}")
            return result

    def _patch(self, kind: str, namespace: str, name: str, ops: list[Obj]) -> Obj:
        key = (kind, namespace, name)
        if key not in self.objects:
            raise api_error(404, "PATCH", name)
        new = apply_patch(self.objects[key], ops)
        new["metadata"]["resourceVersion"] = str(next(self._rv))
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            del self.objects[key]
        else:
            self.objects[key] = new
        return copy.deepcopy(new)

    # -- PodClient -----------------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        return self._call("get", "pods", name, lambda: self.get("pods", namespace, name))

    def patch_pod(self, namespace: str, name: str, ops: list[Obj]) -> Obj:
        return self._call("patch", "pods", name, lambda: self._patch("pods", namespace, name, ops))

    # -- NadClient -----------------------------------------------------------------------------

    def get_nad(self, namespace: str, name: str) -> Obj | None:
        return self._call("get", "nads", name, lambda: self.get("nads", namespace, name))

    def create_nad(self, body: Mapping[str, Any]) -> Obj:
        md = body["metadata"]

        def create() -> Obj:
            if ("nads", md["namespace"], md["name"]) in self.objects:
                raise api_error(409, "POST", md["name"], "AlreadyExists")
            return self.put("nads", copy.deepcopy(dict(body)))

        return self._call("create", "nads", md["name"], create)

    def delete_nad(self, namespace: str, name: str, uid: str) -> None:
        def delete() -> None:
            key = ("nads", namespace, name)
            obj = self.objects.get(key)
            if obj is None:
                return None
            if obj["metadata"]["uid"] != uid:
                raise api_error(409, "DELETE", name, "precondition failed: UID")
            if obj["metadata"].get("finalizers"):
                if not obj["metadata"].get("deletionTimestamp"):
                    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                    obj["metadata"]["resourceVersion"] = str(next(self._rv))
            else:
                del self.objects[key]
            return None

        self._call("delete", "nads", name, delete)

    def patch_nad(self, namespace: str, name: str, ops: list[Obj]) -> Obj:
        return self._call("patch", "nads", name, lambda: self._patch("nads", namespace, name, ops))

    def list_node_pods(self, node_name: str) -> list[Obj]:
        """Metadata only, as the real lister asks the API server for."""
        pods = self._list("pods", lambda o: (o.get("spec") or {}).get("nodeName") == node_name)
        return [
            {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": p["metadata"]}
            for p in pods
        ]

    def list_claims(self, namespace: str) -> list[Obj]:
        self.claim_namespaces_listed.append(namespace)
        return self._list("claims", lambda o: o["metadata"].get("namespace") == namespace)

    def _list(self, kind: str, keep: Callable[[Obj], bool]) -> list[Obj]:
        def listing() -> list[Obj]:
            return [
                copy.deepcopy(o) for (k, _ns, _n), o in sorted(self.objects.items()) if k == kind and keep(o)
            ]

        return self._call("list", kind, "*", listing)

    # -- ShadowLister --------------------------------------------------------------------------

    def list_namespace_shadows(self, node_uid: str, namespace: str) -> list[Obj]:
        self.shadow_namespaces_listed.append(namespace)
        return self.list_shadows(node_uid, namespace)

    def list_shadows(self, node_uid: str, namespace: str = "") -> list[Obj]:

        def listing() -> list[Obj]:
            return [
                copy.deepcopy(o)
                for (kind, ns, _name), o in sorted(self.objects.items())
                if kind == "nads"
                and namespace in ("", ns)
                and (o["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
                and o["metadata"]["labels"].get(NODE_UID_LABEL) == node_uid
            ]

        return self._call("list", "nads", "*", listing)
