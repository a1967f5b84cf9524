"""Per-request views of the Kubernetes API for the daemon: live reads, or the shared informer caches.

Each request gets its own view object, so switching one ADD to live reads never touches the
caches other requests use (spec 10.2's request-local WithLiveReads copy).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from typing import Any, Protocol

from cni_shim.core import prefetch
from cni_shim.core.prefetch import Key
from cni_shim.kube.informers import Held
from cni_shim.kube.paths import list_items, nad_path, nads_path, pod_path, pod_status_path
from sriov_contract.keys import NETWORKS_ANNOTATION

Json = dict[str, Any]


class Api(Protocol):
    def get(self, path: str, what: str) -> Json | None: ...

    def put(self, path: str, body: Mapping[str, Any], what: str) -> None: ...


class Counts(Protocol):
    def live_read(self, kind: str) -> None: ...

    def cache_read(self, kind: str, *, hit: bool) -> None: ...


class LiveView:
    """Every read is an ordinary live GET (no resourceVersion=0, so never served from a watch cache).

    With a thread pool, the NADs a Pod selects are read concurrently. Given the informer's Pods
    too, the NADs its copy of the Pod selects are read beside the first live Pod GET (see
    cni_shim.core.prefetch for why that keeps every answer used live and lets only the live Pod decide).
    """

    pod_reads_live = True

    def __init__(
        self, api: Api, counts: Counts, pool: Executor | None = None, guesses: Held | None = None
    ) -> None:
        self._api = api
        self._counts = counts
        self._pool = pool
        self._guesses = guesses
        self._prefetched: dict[Key, Future[Json | None]] = {}

    def get_pod(self, namespace: str, name: str) -> Json | None:
        if self._guesses is not None and self._pool is not None:
            self._prefetch(self._pool, self._guesses, namespace, name)
        self._counts.live_read("pod")
        return self._api.get(pod_path(namespace, name), f"pod {namespace}/{name}")

    def _prefetch(self, pool: Executor, pods: Held, namespace: str, name: str) -> None:
        # Only the view's first Pod read: later ones are retries or the status write.
        self._guesses = None
        networks = pods.annotation(namespace, name, NETWORKS_ANNOTATION)
        guessed = prefetch.guessed_nads(networks, namespace) if networks is not None else ()
        self._prefetched = {key: pool.submit(self.get_nad, *key) for key in guessed}

    def get_nad(self, namespace: str, name: str) -> Json | None:
        self._counts.live_read("nad")
        return self._api.get(nad_path(namespace, name), f"network-attachment-definition {namespace}/{name}")

    def get_nads(self, keys: Sequence[Key]) -> Iterator[Json | None]:
        reads = prefetch.nad_reads(keys, self._prefetched.keys())
        answers = {key: self._prefetched[key] for key in reads.reuse}
        self._prefetched = {}  # the guesses the live Pod does not need are dropped, failures too
        if self._pool is not None and len(reads.read_now) + len(answers) >= 2:
            answers.update((key, self._pool.submit(self.get_nad, *key)) for key in reads.read_now)
        return self._in_order(keys, answers)

    def _in_order(
        self, keys: Sequence[Key], answers: dict[Key, Future[Json | None]]
    ) -> Iterator[Json | None]:
        # A failed read raises at its selection's turn, so errors keep selection order.
        read: dict[Key, Json | None] = {}
        for key in keys:
            if key in answers:
                yield answers[key].result()
            else:
                if key not in read:
                    read[key] = self.get_nad(*key)
                yield read[key]

    def list_nads(self, namespace: str, label_selector: str) -> list[Json]:
        # Live in every view: only a DEL without its cache asks, and it must not miss a shadow
        # an informer has not seen yet.
        self._counts.live_read("nad")
        what = f"network-attachment-definitions in {namespace} ({label_selector})"
        return list_items(self._api.get(nads_path(namespace, label_selector), what), what)

    def replace_pod_status(self, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        path = pod_status_path(meta["namespace"], meta["name"])
        self._api.put(path, pod, f"status of pod {meta['namespace']}/{meta['name']}")


class CachedView(LiveView):
    """Multus's informer reads: the request's Pod lookup and its NADs come from the shared caches.

    A Pod the cache lacks gets one live GET (Multus #1332); a NAD it lacks is NotFound, with no
    live fallback (Multus #1214). Only the first Pod read is the lookup: later ones are the
    network-status read-modify-write, which needs the live resourceVersion.
    """

    pod_reads_live = False

    def __init__(self, api: Api, counts: Counts, pods: Held, nads: Held) -> None:
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
