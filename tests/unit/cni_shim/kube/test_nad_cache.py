"""The daemon's NAD cache holds what a Pod on this node can use and nothing that grows with the
cluster (issue 34): the NADs that are not managed shadows, and this node's shadows, selected by
the node-UID label; never a listing or watch of every NAD."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from cni_shim.errors import ApiError
from cni_shim.kube import informers
from cni_shim.kube.informers import NOT_SHADOWS, Informer, NadCache, nad_informer, shadows_of
from cni_shim.kube.views import CachedView
from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NODE_UID_LABEL
from tests.unit.cni_shim.kube.test_views import Api, Counts, obj

NODE_UID = "0c5e6f3a-1111-4222-8333-444455556666"


class Cluster:
    """NADs of every kind, listed by label selector as the API server would; watches end at once."""

    def __init__(self, nads: Sequence[dict[str, Any]], node_uid: str | None = NODE_UID) -> None:
        self.nads = nads
        self.node_uid = node_uid
        self.selectors: list[str] = []
        self.gets: list[str] = []

    def get(self, path: str, what: str) -> dict[str, Any] | None:
        self.gets.append(path)
        return {"metadata": {"name": "n0", "uid": self.node_uid}} if self.node_uid else None

    def list(self, path: str, query: Sequence[tuple[str, str]]) -> dict[str, Any]:
        selector = dict(query).get("labelSelector", "")
        self.selectors.append(selector)
        return {
            "metadata": {"resourceVersion": "7"},
            "items": [o for o in self.nads if _selects(selector, o)],
        }

    def watch(self, path: str, query: Sequence[tuple[str, str]], idle_timeout: float) -> Iterator[Any]:
        self.selectors.append("watch " + dict(query).get("labelSelector", ""))
        return iter(())


def _selects(selector: str, o: dict[str, Any]) -> bool:
    labels = o["metadata"].get("labels") or {}
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            key, value = term.split("!=")
            if labels.get(key) == value:
                return False
        else:
            key, value = term.split("=")
            if labels.get(key) != value:
                return False
    return True


def shadow(name: str, node_uid: str) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, NODE_UID_LABEL: node_uid}
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": "1", "labels": labels}}


NADS = [
    obj("ns", "rail-a"),
    {"metadata": {"namespace": "ns", "name": "other-owner", "labels": {MANAGED_BY_LABEL: "someone-else"}}},
    shadow("dra-sriov-mine", NODE_UID),
    shadow("dra-sriov-theirs", "9d1c0f00-aaaa-4bbb-8ccc-ddddeeeeffff"),
]


def synced_cache(cluster: Cluster) -> NadCache:
    cache = NadCache(cluster, "n0", on_error=lambda message: None)
    stop = threading.Event()
    threads = cache.start(stop)
    assert cache.synced.wait(5)
    stop.set()
    for thread in threads:
        thread.join(5)
    return cache


def test_the_cache_holds_every_unmanaged_nad_and_this_nodes_shadows_only() -> None:
    cluster = Cluster(NADS)
    cache = synced_cache(cluster)
    assert sorted(cache.store.versions()) == ["ns/dra-sriov-mine", "ns/other-owner", "ns/rail-a"]
    assert len(cache.store) == 3
    assert cluster.gets == ["/api/v1/nodes/n0"]
    # No request ever goes out without a selector: no node lists or watches every NAD.
    assert set(cluster.selectors) >= {NOT_SHADOWS, shadows_of(NODE_UID)}
    assert all(s.removeprefix("watch ") in (NOT_SHADOWS, shadows_of(NODE_UID)) for s in cluster.selectors)


def test_a_request_reads_either_part_and_misses_another_nodes_shadow() -> None:
    cache = synced_cache(Cluster(NADS))
    api, counts = Api(), Counts()
    view = CachedView(api, counts, informers.Store(), cache.store)
    assert view.get_nad("ns", "rail-a") is not None
    assert view.get_nad("ns", "dra-sriov-mine") is not None
    assert view.get_nad("ns", "dra-sriov-theirs") is None
    assert counts.cache == [("nad", True), ("nad", True), ("nad", False)]
    assert api.gets == []


def test_a_node_that_cannot_be_read_is_retried_before_its_shadows_are_listed(monkeypatch) -> None:
    monkeypatch.setattr(informers, "RETRY_SECONDS", 0.0)
    cluster = Cluster(NADS, node_uid=None)
    errors: list[str] = []
    cache = NadCache(cluster, "n0", on_error=errors.append)
    stop = threading.Event()

    def found_on_third_read(path: str, what: str) -> dict[str, Any] | None:
        cluster.gets.append(path)
        if len(cluster.gets) == 3:
            stop.set()
            return {"metadata": {"uid": NODE_UID}}
        return None

    cluster.get = found_on_third_read  # type: ignore[method-assign]
    cache.parts[1].run(stop)
    assert len(cluster.gets) == 3
    assert cluster.selectors[0] == shadows_of(NODE_UID)
    assert len(errors) == 2 and all(e.startswith("shadow informer: GET node n0: not found") for e in errors)


def test_without_a_node_name_the_cache_is_every_nad() -> None:
    cache = nad_informer(Cluster(NADS), "", on_error=lambda message: None)
    assert isinstance(cache, Informer) and cache.kind == "nad"


def test_an_unreadable_node_is_an_api_error() -> None:
    cache = NadCache(Cluster(NADS, node_uid=None), "n0", on_error=lambda message: None)
    with pytest.raises(ApiError) as caught:
        cache._shadow_query()
    assert caught.value.status == 404


def test_credentials_that_may_not_read_the_node_cache_every_nodes_shadows() -> None:
    """Multus's RBAC has no Node read: the cache then holds what it did before issue 34."""
    cluster = Cluster(NADS)

    def forbidden(path: str, what: str) -> dict[str, Any] | None:
        raise ApiError("GET node n0 returned HTTP 403: forbidden", 403)

    cluster.get = forbidden  # type: ignore[method-assign]
    errors: list[str] = []
    cache = NadCache(cluster, "n0", on_error=errors.append)
    assert cache._shadow_query() == [("labelSelector", informers.ALL_SHADOWS)]
    assert errors and "caching every node's shadows" in errors[0]
