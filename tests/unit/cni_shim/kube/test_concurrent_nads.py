"""A live ADD reads the NADs its Pod selects together, yet uses and reports them in selection order."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from cni_shim.errors import ApiError
from cni_shim.kube.informers import Store
from cni_shim.kube.paths import nad_path
from cni_shim.kube.views import CachedView, LiveView
from cni_shim.ports import ManyNads
from tests.fakes.cni_ports import FakeKube
from tests.support.apiviews import Counts

NETWORKS = "k8s.v1.cni.cncf.io/networks"


class MeetingApi:
    """NAD GETs wait until `parties` of them are in flight at once; a sequential reader never gets there."""

    def __init__(self, parties: int, failing: str = "") -> None:
        self.together = threading.Barrier(parties, timeout=10)
        self.failing = failing

    def get(self, path: str, what: str) -> dict[str, Any] | None:
        self.together.wait()
        if path.endswith("/" + self.failing):
            raise ApiError(f"GET {what} returned HTTP 500", 500)
        if path.endswith("/absent"):
            return None
        return {"metadata": {"name": path.rsplit("/", 1)[1]}}

    def put(self, path: str, body: Any, what: str) -> None:
        raise AssertionError("no writes here")


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4) as executor:
        yield executor


def test_live_view_with_readers_has_every_nad_read_in_flight_at_once(pool):
    view = LiveView(MeetingApi(3), Counts(), pool)
    found = list(view.get_nads([("ns", "a"), ("ns", "b"), ("ns", "c")]))
    assert [nad["metadata"]["name"] for nad in found if nad is not None] == ["a", "b", "c"]


def test_a_failed_read_surfaces_only_when_its_turn_comes(pool):
    view = LiveView(MeetingApi(2, failing="b"), Counts(), pool)
    reads = view.get_nads([("ns", "absent"), ("ns", "b")])
    assert next(reads) is None
    with pytest.raises(ApiError, match="HTTP 500"):
        next(reads)


def test_without_readers_and_in_cached_views_nads_are_read_in_turn():
    class Recording:
        def __init__(self) -> None:
            self.paths: list[str] = []

        def get(self, path: str, what: str) -> dict[str, Any] | None:
            self.paths.append(path)
            return None

        def put(self, path: str, body: Any, what: str) -> None:
            pass

    api = Recording()
    assert list(LiveView(api, Counts()).get_nads([("ns", "a"), ("ns", "b")])) == [None, None]
    assert api.paths == [nad_path("ns", "a"), nad_path("ns", "b")]
    cached = CachedView(api, Counts(), Store(), Store())
    assert isinstance(cached, ManyNads)
    assert list(cached.get_nads([("ns", "a")])) == [None]
    assert len(api.paths) == 2  # a NAD the cache lacks is NotFound, never a live read


@dataclass
class BatchingKube(FakeKube):
    batches: list[list[tuple[str, str]]] = field(default_factory=list)

    def get_nads(self, keys: Sequence[tuple[str, str]]) -> Iterator[dict[str, Any] | None]:
        self.batches.append(list(keys))
        return (self.get_nad(namespace, name) for namespace, name in keys)


def test_the_core_asks_for_all_selected_nads_at_once_and_keeps_their_order(shim):
    shim.kube = BatchingKube()
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-b, net-a"})
    shim.kube.add_nad("ns1", "net-a", {"cniVersion": "1.0.0", "name": "a", "type": "plug-a"})
    shim.kube.add_nad("ns1", "net-b", {"cniVersion": "1.0.0", "name": "b", "type": "plug-b"})
    out = shim.run("ADD", shim.conf())
    assert out.status == 0, out.stdout
    assert shim.kube.batches == [[("ns1", "net-b"), ("ns1", "net-a")]]
    assert shim.executor.commands() == [
        ("ptp", "ADD", "eth0"),
        ("plug-b", "ADD", "net1"),
        ("plug-a", "ADD", "net2"),
    ]


def test_the_first_missing_selection_is_the_one_reported(shim):
    shim.kube = BatchingKube()
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a, gone-1, gone-2"})
    shim.kube.add_nad("ns1", "net-a", {"cniVersion": "1.0.0", "name": "a", "type": "plug-a"})
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert "(gone-1)" in out.json["msg"]
    assert shim.executor.calls == []
