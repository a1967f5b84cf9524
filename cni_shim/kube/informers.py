"""Watch-based caches (informers) of this node's Pods and NADs, shared by every request.

An informer lists once, then follows a watch from the list's resourceVersion, relisting when
the server says the version is gone. The store hands out deep copies so a request can never
change what other requests see.

The NADs a node holds do not grow with the cluster (issue 34): every NAD that is not a managed
shadow, and this node's shadows (selected by the node-UID label the driver writes on each), two
watches read as one store. Another node's shadows, eight per eight-VF Pod, are never listed or
watched here. A Pod on this node can only attach its own node's shadows (the guard refuses a
binding of another node), so only a misdirected selection reads differently: NotFound from the
cache, as for any NAD the cache lacks, where live reads still reach the guard's refusal.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from cni_shim.errors import ApiError
from cni_shim.kube.paths import NADS_PATH, node_path
from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NODE_UID_LABEL

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


class NodeSource(Source, Protocol):
    """A source that can also read the Node (NadCache selects this node's shadows by its UID)."""

    def get(self, path: str, what: str) -> Json | None: ...


class Held(Protocol):
    """What requests and the test hooks read of a cache."""

    def get(self, namespace: str, name: str) -> Json | None: ...

    def annotation(self, namespace: str, name: str, key: str) -> str | None: ...

    def freeze(self) -> None: ...

    def versions(self) -> dict[str, str]: ...

    def __len__(self) -> int: ...


class Synced(Protocol):
    def wait(self, timeout: float | None = None) -> bool: ...


class Cache(Protocol):
    """An informer, or informers read as one (NadCache)."""

    kind: str

    @property
    def store(self) -> Held: ...

    @property
    def synced(self) -> Synced: ...

    def start(self, stop: threading.Event) -> object: ...


Query = Sequence[tuple[str, str]]


class Informer:
    def __init__(
        self,
        kind: str,
        source: Source,
        path: str,
        query: Query | Callable[[], Query],
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
        # A callable is asked again at each relist (the node-UID selector: see NadCache).
        self._query = query if callable(query) else (lambda fixed=tuple(query): fixed)
        self._transform = transform
        self._on_error = on_error
        self._on_list = on_list
        self._cause = FIRST_LIST
        self._listed: Query = ()

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
        self._listed = tuple(self._query())
        listed = self._source.list(self._path, self._listed)
        found = listed.get("items") or ()
        self.store.replace([self._transform(o) for o in found])
        self.synced.set()
        version = str((listed.get("metadata") or {}).get("resourceVersion", ""))
        self._on_list(self._cause, len(found), version)
        return version

    def _follow(self, version: str) -> str:
        """One watch; returns the version to resume from, or "" when a relist is needed."""
        query = [
            *self._listed,
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


NOT_SHADOWS = f"{MANAGED_BY_LABEL}!={MANAGED_BY_VALUE}"
"""Every NAD the driver does not manage (`!=` also selects NADs without the label)."""


ALL_SHADOWS = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"


def shadows_of(node_uid: str) -> str:
    """The managed shadows of one node: with NOT_SHADOWS, every NAD a Pod here can use."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{NODE_UID_LABEL}={node_uid}"


class StoreUnion:
    """Stores of disjoint selections, read as one."""

    def __init__(self, stores: Sequence[Store]) -> None:
        self._stores = tuple(stores)

    def get(self, namespace: str, name: str) -> Json | None:
        return next((o for s in self._stores if (o := s.get(namespace, name)) is not None), None)

    def annotation(self, namespace: str, name: str, key: str) -> str | None:
        return next((v for s in self._stores if (v := s.annotation(namespace, name, key)) is not None), None)

    def freeze(self) -> None:
        for store in self._stores:
            store.freeze()

    def versions(self) -> dict[str, str]:
        return {k: v for s in self._stores for k, v in s.versions().items()}

    def __len__(self) -> int:
        return sum(len(s) for s in self._stores)


class AllSynced:
    def __init__(self, events: Sequence[threading.Event]) -> None:
        self._events = tuple(events)

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        return all(
            e.wait(None if deadline is None else max(0.0, deadline - time.monotonic())) for e in self._events
        )


class NadCache:
    """The NADs this node can use: those not managed, and this node's shadows (two informers).

    The shadows' selector needs the Node's UID (shadows carry no node-name label: a node name
    may not fit in a label value); it is read at each relist of that informer, which retries
    like any failed listing until the Node can be read. Credentials that may not read it at all
    (Multus's RBAC) get every node's shadows, as before, and a warning."""

    kind = "nad"

    def __init__(
        self,
        source: NodeSource,
        node_name: str,
        on_error: Callable[[str], None],
        on_list: OnList = lambda kind, cause, count, version: None,
    ) -> None:
        self._source = source
        self._node_name = node_name
        self._on_error = on_error
        self.parts = (
            Informer(
                "nad",
                source,
                NADS_PATH,
                [("labelSelector", NOT_SHADOWS)],
                on_error=on_error,
                on_list=lambda *listed: on_list("nad", *listed),
            ),
            Informer(
                "shadow",
                source,
                NADS_PATH,
                self._shadow_query,
                on_error=on_error,
                on_list=lambda *listed: on_list("shadow", *listed),
            ),
        )
        self._store = StoreUnion([p.store for p in self.parts])
        self._synced = AllSynced([p.synced for p in self.parts])

    @property
    def store(self) -> StoreUnion:
        return self._store

    @property
    def synced(self) -> AllSynced:
        return self._synced

    def _shadow_query(self) -> Query:
        what = f"node {self._node_name}"
        try:
            node = self._source.get(node_path(self._node_name), what)
        except ApiError as exc:
            if exc.status != 403:
                raise
            # Multus's RBAC (no Node read), as when we replace it in place: every node's shadows,
            # as before issue 34, rather than none.
            self._on_error(
                f"shadow informer: may not GET {what} ({exc.message}); caching every node's shadows"
            )
            return [("labelSelector", ALL_SHADOWS)]
        uid = str(((node or {}).get("metadata") or {}).get("uid") or "")
        if not uid:
            raise ApiError(f"GET {what}: not found; its shadows cannot be selected without its UID", 404)
        return [("labelSelector", shadows_of(uid))]

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        return [p.start(stop) for p in self.parts]


def nad_informer(
    source: NodeSource,
    node_name: str,
    on_error: Callable[[str], None],
    on_list: OnList = lambda kind, cause, count, version: None,
) -> Cache:
    """This node's NAD cache; without a node name (no node to scope by), every NAD."""
    if not node_name:
        return Informer(
            "nad", source, NADS_PATH, [], on_error=on_error, on_list=lambda *listed: on_list("nad", *listed)
        )
    return NadCache(source, node_name, on_error, on_list)
