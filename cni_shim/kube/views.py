"""Per-request views of the Kubernetes API for the daemon: live reads, or the shared informer caches.

Each request gets its own view object, so switching one ADD to live reads never touches the
caches other requests use (spec 10.2's request-local WithLiveReads copy).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from typing import Any, Protocol

from cni_shim.core import prefetch
from cni_shim.core.prefetch import Key, Listing
from cni_shim.kube.informers import Held
from cni_shim.kube.paths import list_items, nad_path, nads_path, pod_path, pod_status_path
from sriov_contract.keys import NETWORKS_ANNOTATION, REGISTRY_ANNOTATION

Json = dict[str, Any]


class Api(Protocol):
    def get(self, path: str, what: str) -> Json | None: ...

    def put(self, path: str, body: Mapping[str, Any], what: str) -> None: ...


class Counts(Protocol):
    def live_read(self, kind: str) -> None: ...

    def cache_read(self, kind: str, *, hit: bool) -> None: ...


class LiveView:
    """Every read is an ordinary live GET (no resourceVersion=0, so never served from a watch cache).

    With a thread pool, the NADs a Pod selects are read concurrently, and its managed shadows by
    one LIST when there are several. Given the informer's Pods too, the NADs its copy of the Pod
    selects are read beside the first live Pod GET (see cni_shim.core.prefetch for why that
    keeps every answer used live and lets only the live Pod decide).
    """

    pod_reads_live = True

    def __init__(
        self, api: Api, counts: Counts, pool: Executor | None = None, guesses: Held | None = None
    ) -> None:
        self._api = api
        self._counts = counts
        self._pool = pool
        self._guesses = guesses
        self._first_pod_read = True
        self._prefetched: dict[Key, Future[Json | None]] = {}
        self._listing: tuple[Listing, Future[dict[Key, Json]]] | None = None
        self._live_listing: Listing | None = None  # what the live Pod's registry names

    def get_pod(self, namespace: str, name: str) -> Json | None:
        # Only the view's first Pod read is the ADD's: later ones are retries or the status write.
        first, self._first_pod_read = self._first_pod_read, False
        if self._guesses is not None and self._pool is not None:
            self._prefetch(self._pool, self._guesses, namespace, name)
        self._counts.live_read("pod")
        pod = self._api.get(pod_path(namespace, name), f"pod {namespace}/{name}")
        if first and pod is not None and self._pool is not None:
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            registry = annotations.get(REGISTRY_ANNOTATION)
            self._live_listing = prefetch.shadow_listing(
                registry if isinstance(registry, str) else None, namespace
            )
        return pod

    def _prefetch(self, pool: Executor, pods: Held, namespace: str, name: str) -> None:
        self._guesses = None
        networks = pods.annotation(namespace, name, NETWORKS_ANNOTATION)
        guessed = prefetch.guessed_nads(networks, namespace) if networks is not None else ()
        listing = prefetch.shadow_listing(pods.annotation(namespace, name, REGISTRY_ANNOTATION), namespace)
        if listing is not None and prefetch.worth_listing(listing, guessed, frozenset()):
            self._listing = (listing, pool.submit(self._list, listing))
            guessed = tuple(key for key in guessed if key not in listing.keys)
        self._prefetched = {key: pool.submit(self.get_nad, *key) for key in guessed}

    def get_nad(self, namespace: str, name: str) -> Json | None:
        self._counts.live_read("nad")
        return self._api.get(nad_path(namespace, name), f"network-attachment-definition {namespace}/{name}")

    def _list(self, listing: Listing) -> dict[Key, Json]:
        self._counts.live_read("nad")
        what = f"network-attachment-definitions in {listing.namespace} ({listing.selector})"
        items = list_items(self._api.get(nads_path(listing.namespace, listing.selector), what), what)
        return {
            (listing.namespace, str(meta.get("name"))): item
            for item in items
            if (meta := item.get("metadata") or {}).get("namespace") == listing.namespace
        }

    def _listing_for(self, keys: Sequence[Key]) -> tuple[Listing, Future[dict[Key, Json]]] | None:
        """The LIST whose answers this request uses: the one started beside the Pod GET if it
        is the live Pod's, else one started now if it still saves requests."""
        started, self._listing = self._listing, None
        live = self._live_listing
        if live is None:
            return started  # a copy's LIST the live Pod does not confirm: its answers are live all the same
        if started is not None and (started[0].namespace, started[0].selector) == (
            live.namespace,
            live.selector,
        ):
            return live, started[1]
        if self._pool is None or not prefetch.worth_listing(live, keys, self._prefetched.keys()):
            return None
        return live, self._pool.submit(self._list, live)

    def get_nads(self, keys: Sequence[Key]) -> Iterator[Json | None]:
        listing = self._listing_for(keys)
        reads = prefetch.nad_reads(keys, self._prefetched.keys(), listing[0].keys if listing else frozenset())
        answers = {key: self._prefetched[key] for key in reads.reuse}
        self._prefetched = {}  # the guesses the live Pod does not need are dropped, failures too
        pending = len(reads.read_now) + len(answers) + (1 if reads.from_listing else 0)
        if self._pool is not None and pending >= 2:
            answers.update((key, self._pool.submit(self.get_nad, *key)) for key in reads.read_now)
        listed = listing[1] if listing is not None and reads.from_listing else None
        return self._in_order(keys, answers, reads.from_listing, listed)

    def _in_order(
        self,
        keys: Sequence[Key],
        answers: dict[Key, Future[Json | None]],
        from_listing: frozenset[Key] = frozenset(),
        listing: Future[dict[Key, Json]] | None = None,
    ) -> Iterator[Json | None]:
        # A failed read raises at its selection's turn, so errors keep selection order.
        read: dict[Key, Json | None] = {}
        listed: dict[Key, Json] | None = None
        for key in keys:
            if key in answers:
                yield answers[key].result()
                continue
            if key in from_listing and listing is not None:
                if listed is None:
                    listed = _answered(listing)
                if key in listed:
                    yield listed[key]
                    continue
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


def _answered(listing: Future[dict[Key, Json]]) -> dict[Key, Json]:
    """The LIST's objects by key; a LIST that failed answers nothing, so each of its NADs is then
    read by its own GET, whose answer (or error) is the one the serial order gives."""
    try:
        return listing.result()
    except Exception:  # a failed LIST (any cause: 403, timeout, a bad answer) costs only the GETs it saved
        return {}


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
