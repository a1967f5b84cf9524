"""Per-request views of the Kubernetes API for the daemon: live reads, or the shared informer caches.

Each request gets its own view object, so switching one ADD to live reads never touches the
caches other requests use (spec 10.2's request-local WithLiveReads copy).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, Protocol

from cni_shim.apiserver import nad_path, pod_path
from cni_shim.informers import Store

Json = dict[str, Any]


class Api(Protocol):
    def get(self, path: str, what: str) -> Json | None: ...

    def put(self, path: str, body: Mapping[str, Any], what: str) -> None: ...


class Counts(Protocol):
    def live_read(self, kind: str) -> None: ...

    def cache_read(self, kind: str, *, hit: bool) -> None: ...


class LiveView:
    """Every read is an ordinary live GET (no resourceVersion=0, so never served from a watch cache).

    With a thread pool, the NADs a Pod selects are read concurrently: each is still a live GET
    issued after the Pod read, but an ADD waits for one round trip instead of one per NAD.
    """

    pod_reads_live = True

    def __init__(self, api: Api, counts: Counts, pool: Executor | None = None) -> None:
        self._api = api
        self._counts = counts
        self._pool = pool

    def get_pod(self, namespace: str, name: str) -> Json | None:
        self._counts.live_read("pod")
        return self._api.get(pod_path(namespace, name), f"pod {namespace}/{name}")

    def get_nad(self, namespace: str, name: str) -> Json | None:
        self._counts.live_read("nad")
        return self._api.get(nad_path(namespace, name), f"network-attachment-definition {namespace}/{name}")

    def get_nads(self, keys: Sequence[tuple[str, str]]) -> Iterator[Json | None]:
        if self._pool is None or len(keys) < 2:
            for namespace, name in keys:
                yield self.get_nad(namespace, name)
            return
        reads = [self._pool.submit(self.get_nad, namespace, name) for namespace, name in keys]
        for read in reads:
            yield read.result()

    def replace_pod_status(self, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        path = pod_path(meta["namespace"], meta["name"]) + "/status"
        self._api.put(path, pod, f"status of pod {meta['namespace']}/{meta['name']}")


class CachedView(LiveView):
    """Multus's informer reads: the request's Pod lookup and its NADs come from the shared caches.

    A Pod the cache lacks gets one live GET (Multus #1332); a NAD it lacks is NotFound, with no
    live fallback (Multus #1214). Only the first Pod read is the lookup: later ones are the
    network-status read-modify-write, which needs the live resourceVersion.
    """

    pod_reads_live = False

    def __init__(self, api: Api, counts: Counts, pods: Store, nads: Store) -> None:
        super().__init__(api, counts)
        self._pods = pods
        self._nads = nads
        self._looked_up = False

    def get_pod(self, namespace: str, name: str) -> Json | None:
        if self._looked_up:
            return super().get_pod(namespace, name)
        self._looked_up = True
        pod = self._pods.get(namespace, name)
        self._counts.cache_read("pod", hit=pod is not None)
        return pod if pod is not None else super().get_pod(namespace, name)

    def get_nad(self, namespace: str, name: str) -> Json | None:
        nad = self._nads.get(namespace, name)
        self._counts.cache_read("nad", hit=nad is not None)
        return nad
