"""Request views over the API and the informer stores: what is live, what is cached, what is counted."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from cni_shim.errors import ApiError
from cni_shim.kube import informers
from cni_shim.kube.informers import Informer, Store, pod_informer, slim_pod
from cni_shim.kube.views import CachedView, LiveView


class Api:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.gets: list[str] = []
        self.puts: list[str] = []

    def get(self, path: str, what: str):
        self.gets.append(path)
        found = self.objects.get(path)
        return copy.deepcopy(found) if found is not None else None

    def put(self, path: str, body, what: str) -> None:
        self.puts.append(path)


class Counts:
    def __init__(self) -> None:
        self.live: list[str] = []
        self.cache: list[tuple[str, bool]] = []

    def live_read(self, kind: str) -> None:
        self.live.append(kind)

    def cache_read(self, kind: str, *, hit: bool) -> None:
        self.cache.append((kind, hit))


def obj(ns: str, name: str, version: str = "1", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name, "resourceVersion": version}, **extra}


def version_of(found: dict[str, Any] | None) -> str:
    assert found is not None, "the view found no object"
    return str(found["metadata"]["resourceVersion"])


POD = "/api/v1/namespaces/ns/pods/p"
NAD = "/apis/k8s.cni.cncf.io/v1/namespaces/ns/network-attachment-definitions/n"


def test_live_view_reads_and_writes_the_api_only():
    api, counts = Api(), Counts()
    api.objects[POD] = obj("ns", "p", "9")
    view = LiveView(api, counts)
    assert version_of(view.get_pod("ns", "p")) == "9"
    assert view.get_nad("ns", "n") is None
    view.replace_pod_status(obj("ns", "p"))
    assert api.gets == [POD, NAD]
    assert api.puts == [POD + "/status"]
    assert counts.live == ["pod", "nad"]


def test_cached_view_looks_the_pod_up_in_the_cache_once_then_reads_live_for_the_status_write():
    api, counts = Api(), Counts()
    pods, nads = Store(), Store()
    pods.replace([obj("ns", "p", "1")])
    api.objects[POD] = obj("ns", "p", "2")
    view = CachedView(api, counts, pods, nads)
    assert version_of(view.get_pod("ns", "p")) == "1"
    assert version_of(view.get_pod("ns", "p")) == "2"
    assert counts.cache == [("pod", True)]
    assert counts.live == ["pod"]


def test_cached_view_misses_go_live_for_pods_but_not_for_nads():
    api, counts = Api(), Counts()
    api.objects[POD] = obj("ns", "p")
    api.objects[NAD] = obj("ns", "n")
    view = CachedView(api, counts, Store(), Store())
    assert view.get_pod("ns", "p") is not None  # Multus #1332: one live GET after a miss
    assert view.get_nad("ns", "n") is None  # Multus #1214: no live fallback for NADs
    assert api.gets == [POD]
    assert counts.cache == [("pod", False), ("nad", False)]


def test_the_store_hands_out_copies_and_a_frozen_store_ignores_everything():
    store = Store()
    store.apply("ADDED", obj("ns", "a", "1"))
    got = store.get("ns", "a")
    assert got is not None
    got["metadata"]["resourceVersion"] = "changed by a request"
    assert store.versions() == {"ns/a": "1"}
    store.freeze()
    store.apply("MODIFIED", obj("ns", "a", "2"))
    store.apply("ADDED", obj("ns", "b", "3"))
    store.replace([])
    assert store.versions() == {"ns/a": "1"}
    assert len(store) == 1


def test_slim_pod_keeps_what_cni_reads():
    pod = {
        "metadata": {"name": "p", "annotations": {"a": "b"}, "managedFields": [{}]},
        "spec": {"nodeName": "n", "volumes": [{}], "containers": [{"name": "c", "env": [{}], "args": ["x"]}]},
    }
    assert slim_pod(pod) == {
        "metadata": {"name": "p", "annotations": {"a": "b"}},
        "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
    }


class Source:
    """Scripted list and watch answers; the informer's stop event is set when the script runs out."""

    def __init__(self, script: list[Any], stop) -> None:
        self.script = script
        self.stop = stop
        self.calls: list[tuple[str, dict[str, str]]] = []

    def _next(self, kind: str, query):
        self.calls.append((kind, dict(query)))
        item = self.script.pop(0)
        if not self.script:
            self.stop.set()
        if isinstance(item, Exception):
            raise item
        return item

    def list(self, path, query):
        return self._next("list", query)

    def watch(self, path, query, idle_timeout):
        yield from self._next("watch", query)


def test_the_informer_lists_follows_the_watch_and_relists_after_an_error(monkeypatch):
    monkeypatch.setattr(informers, "RETRY_SECONDS", 0.0)
    stop = threading.Event()
    script = [
        {"metadata": {"resourceVersion": "10"}, "items": [obj("ns", "a", "5")]},
        [
            {"type": "ADDED", "object": obj("ns", "b", "11")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
        ],
        [{"type": "DELETED", "object": obj("ns", "a", "13")}, {"type": "ERROR", "object": {"code": 410}}],
        ApiError("api server away", 0),
        {"metadata": {"resourceVersion": "20"}, "items": [obj("ns", "c", "19")]},
    ]
    source = Source(script, stop)
    errors: list[str] = []
    informer = Informer(
        "pod", source, "/api/v1/pods", [("fieldSelector", "spec.nodeName=n")], on_error=errors.append
    )
    informer.run(stop)
    assert [(k, q.get("resourceVersion")) for k, q in source.calls] == [
        ("list", None),
        ("watch", "10"),
        ("watch", "12"),  # resumed from the bookmark
        ("list", None),  # the ERROR event (410 Gone) forces a relist, which failed ...
        ("list", None),  # ... and is retried
    ]
    assert all(q["fieldSelector"] == "spec.nodeName=n" for _, q in source.calls)
    assert informer.synced.is_set()
    assert informer.store.versions() == {"ns/c": "19"}
    assert errors == ["pod informer: api server away; retrying in 0s"]


def test_every_list_reports_its_cause_a_410_expired_an_outage_failed(monkeypatch):
    monkeypatch.setattr(informers, "RETRY_SECONDS", 0.0)
    stop = threading.Event()
    listing = {"metadata": {"resourceVersion": "10"}, "items": [obj("ns", "a", "5")]}
    script = [
        listing,
        [{"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}],
        listing,
        ApiError("WATCH broke off", 0),
        ApiError("connection refused", 0),
        listing,
        ApiError("too old resource version", 410),  # a watch refused outright with 410
        listing,
        [{"type": "ERROR", "object": {"code": 500}}],
        listing,
    ]
    lists: list[tuple[str, str, int, str]] = []
    informer = pod_informer(Source(script, stop), "n", lambda message: None, lambda *a: lists.append(a))
    informer.run(stop)
    assert lists == [
        ("pod", cause, 1, "10")
        for cause in (
            informers.FIRST_LIST,
            informers.EXPIRED,
            informers.FAILED,
            informers.EXPIRED,
            informers.FAILED,
        )
    ]


@pytest.mark.parametrize("frozen", [False, True])
def test_watch_events_reach_the_store_unless_frozen(frozen):
    store = Store()
    store.replace([obj("ns", "a", "1")])
    if frozen:
        store.freeze()
    store.apply("DELETED", obj("ns", "a", "2"))
    assert store.versions() == ({"ns/a": "1"} if frozen else {})


def test_a_shadow_listing_is_live_in_every_view():
    api, counts = Api(), Counts()
    path = "/apis/k8s.cni.cncf.io/v1/namespaces/ns/network-attachment-definitions?labelSelector=a%3Db%2Cc%3Dd"
    api.objects[path] = {"items": [obj("ns", "n")]}
    for view in (LiveView(api, counts), CachedView(api, counts, Store(), Store())):
        assert [o["metadata"]["name"] for o in view.list_nads("ns", "a=b,c=d")] == ["n"]
    assert api.gets == [path, path]
    assert counts.live == ["nad", "nad"] and counts.cache == []
    assert LiveView(api, counts).list_nads("other", "a=b") == []  # a 404 lists nothing
    api.objects[path] = {"items": "nope"}
    with pytest.raises(ApiError):
        LiveView(api, counts).list_nads("ns", "a=b,c=d")
