"""Watch-based caches (informers) of this node's Pods and of all NADs, shared by every request.

An informer lists once, then follows a watch from the list's resourceVersion, relisting when
the server says the version is gone. The store hands out deep copies so a request can never
change what other requests see.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from cni_shim.errors import ApiError
from cni_shim.kube.paths import NADS_PATH

Json = dict[str, Any]
WATCH_SECONDS = 240
RETRY_SECONDS = 1.0
# Why an informer lists (the `cause` of its relist log line and metric): its first list, a
# watch the server ended with an error (410 Gone after a compaction or an API server restart),
# or a list or watch that failed (the API server unreachable).
FIRST_LIST = "start"
EXPIRED = "expired"
FAILED = "failed"
GONE = 410


class Source(Protocol):
    def list(self, path: str, query: Sequence[tuple[str, str]]) -> Json: ...

    def watch(self, path: str, query: Sequence[tuple[str, str]], idle_timeout: float) -> Iterator[Json]: ...


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def slim_pod(pod: Json) -> Json:
    """Only what CNI reads stays in memory (Multus's transform: Pods are the bulk of a node's cache)."""
    meta = pod.get("metadata") or {}
    meta.pop("managedFields", None)
    spec = pod.get("spec") or {}
    spec.pop("volumes", None)
    for container in spec.get("containers") or ():
        for field in ("command", "args", "env", "volumeMounts"):
            container.pop(field, None)
    return pod


class Store:
    """Objects by (namespace, name). `freeze()` exists only for tests that need a stale cache."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[tuple[str, str], Json] = {}
        self._frozen = False

    def get(self, namespace: str, name: str) -> Json | None:
        with self._lock:
            found = self._items.get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def annotation(self, namespace: str, name: str, key: str) -> str | None:
        """One annotation of a held object, without the deep copy `get` makes (a hot-path peek)."""
        with self._lock:
            found = self._items.get((namespace, name))
            value = (((found or {}).get("metadata") or {}).get("annotations") or {}).get(key)
            return value if isinstance(value, str) else None

    def replace(self, items: Sequence[Json]) -> None:
        with self._lock:
            if not self._frozen:
                self._items = {_key(o): o for o in items}

    def apply(self, event_type: str, obj: Json) -> None:
        with self._lock:
            if self._frozen:
                return
            if event_type == "DELETED":
                self._items.pop(_key(obj), None)
            else:
                self._items[_key(obj)] = obj

    def freeze(self) -> None:
        with self._lock:
            self._frozen = True

    def versions(self) -> dict[str, str]:
        """namespace/name -> resourceVersion of everything held (the test hook's view)."""
        with self._lock:
            return {
                f"{ns}/{name}": str((o.get("metadata") or {}).get("resourceVersion", ""))
                for (ns, name), o in self._items.items()
            }

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class Informer:
    def __init__(
        self,
        kind: str,
        source: Source,
        path: str,
        query: Sequence[tuple[str, str]],
        *,
        transform: Callable[[Json], Json] = lambda o: o,
        on_error: Callable[[str], None] = lambda message: None,
        on_list: Callable[[str, int, str], None] = lambda cause, count, version: None,
    ) -> None:
        """`on_list(cause, objects, resourceVersion)` after every successful list: the daemon
        logs and counts relists, the proof that it caught up after an outage or a 410."""
        self.kind = kind
        self.store = Store()
        self.synced = threading.Event()
        self._source = source
        self._path = path
        self._query = tuple(query)
        self._transform = transform
        self._on_error = on_error
        self._on_list = on_list
        self._cause = FIRST_LIST

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name=f"informer-{self.kind}", daemon=True)
        thread.start()
        return thread

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                version = self._relist()
                while not stop.is_set() and version:
                    version = self._follow(version)
            except ApiError as exc:
                self._cause = EXPIRED if exc.status == GONE else FAILED
                self._on_error(f"{self.kind} informer: {exc.message}; retrying in {RETRY_SECONDS:g}s")
                stop.wait(RETRY_SECONDS)

    def _relist(self) -> str:
        listed = self._source.list(self._path, self._query)
        found = listed.get("items") or ()
        self.store.replace([self._transform(o) for o in found])
        self.synced.set()
        version = str((listed.get("metadata") or {}).get("resourceVersion", ""))
        self._on_list(self._cause, len(found), version)
        return version

    def _follow(self, version: str) -> str:
        """One watch; returns the version to resume from, or "" when a relist is needed."""
        query = [
            *self._query,
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(WATCH_SECONDS)),
        ]
        for event in self._source.watch(self._path, query, WATCH_SECONDS + 30):
            kind = str(event.get("type", ""))
            obj = event.get("object") or {}
            if kind == "ERROR":
                # typically 410 Gone: the version is too old to resume from
                self._cause = EXPIRED if obj.get("code") == GONE else FAILED
                return ""
            version = str((obj.get("metadata") or {}).get("resourceVersion", version))
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.store.apply(kind, self._transform(obj))
        return version


OnList = Callable[[str, str, int, str], None]


def pod_informer(
    source: Source,
    node_name: str,
    on_error: Callable[[str], None],
    on_list: OnList = lambda kind, cause, count, version: None,
) -> Informer:
    query = [("fieldSelector", f"spec.nodeName={node_name}")] if node_name else []
    return Informer(
        "pod",
        source,
        "/api/v1/pods",
        query,
        transform=slim_pod,
        on_error=on_error,
        on_list=lambda *listed: on_list("pod", *listed),
    )


def nad_informer(
    source: Source,
    on_error: Callable[[str], None],
    on_list: OnList = lambda kind, cause, count, version: None,
) -> Informer:
    return Informer(
        "nad", source, NADS_PATH, [], on_error=on_error, on_list=lambda *listed: on_list("nad", *listed)
    )
