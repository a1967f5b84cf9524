"""A live ADD starts its NAD GETs from the informer's copy of the Pod, yet uses exactly the live Pod's NADs.

The property tests drive the real LiveView (real thread pool, fake API): whatever the informer copy
names, the answers equal reading the live Pod's NADs one by one, errors included, and every answer
used comes from a GET issued after the ADD began.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cni_shim.core.prefetch import Key, NadReads, guessed_nads, nad_reads
from cni_shim.errors import ApiError
from cni_shim.kube.informers import Store
from cni_shim.kube.paths import nad_path, pod_path
from cni_shim.kube.views import LiveView
from sriov_contract.keys import NETWORKS_ANNOTATION, REGISTRY_ANNOTATION
from tests.support.apiviews import Counts

A, B, C, D = ("ns", "a"), ("ns", "b"), ("ns", "c"), ("other", "d")


@pytest.mark.parametrize(
    ("needed", "prefetched", "reuse", "read_now"),
    [
        pytest.param([A, B], {A, B}, {A, B}, (), id="fresh copy: nothing left to read"),
        pytest.param([A, B], set(), set(), (A, B), id="no copy: everything read now"),
        pytest.param([A, C], {A, B}, {A}, (C,), id="stale copy: the guess it missed is read now"),
        pytest.param([], {A, B}, set(), (), id="live Pod selects nothing: every guess dropped"),
        pytest.param([C, A, C], {A}, {A}, (C,), id="a repeated selection is read once"),
        pytest.param([D, A], {("ns", "d")}, set(), (D, A), id="same name in another namespace is no match"),
    ],
)
def test_which_prefetched_answers_are_used_and_which_reads_remain(needed, prefetched, reuse, read_now):
    assert nad_reads(needed, prefetched) == NadReads(frozenset(reuse), read_now)


@pytest.mark.parametrize(
    ("networks", "guessed"),
    [
        ("a, other/d@net9", (A, D)),
        ('[{"name": "b"}, {"name": "a", "interface": "x1"}, {"name": "b"}]', (B, A)),
        ("", ()),
        ("a/b/c", ()),  # the copy does not parse: no guess, the live Pod reports the error
        ("[" * 5000, ()),
    ],
)
def test_the_guess_is_the_copy_s_selections_once_each(networks, guessed):
    assert guessed_nads(networks, "ns") == guessed


class CountingApi:
    """NADs whose resourceVersion is the sequence number of the GET that read them."""

    def __init__(self, objects: dict[Key, str], pod_networks: str) -> None:
        self.objects = objects  # key -> "ok", "absent" or "fail"
        self.pod_networks = pod_networks
        self.sequence = itertools.count(1)
        self.lock = threading.Lock()
        self.gets: list[str] = []

    def get(self, path: str, what: str) -> dict[str, Any] | None:
        with self.lock:
            self.gets.append(path)
            seq = next(self.sequence)
        if path == pod_path("ns", "p"):
            return {
                "metadata": {
                    "namespace": "ns",
                    "name": "p",
                    "annotations": {NETWORKS_ANNOTATION: self.pod_networks},
                }
            }
        key = next(k for k in self.objects if nad_path(*k) == path)
        outcome = self.objects[key]
        if outcome == "fail":
            raise ApiError(f"GET {what} returned HTTP 500", 500)
        return None if outcome == "absent" else {"metadata": {"name": key[1], "resourceVersion": seq}}

    def put(self, path: str, body: Any, what: str) -> None:
        raise AssertionError("no writes here")

    def read_sequentially(self, keys: Sequence[Key]) -> list[Any]:
        """Today's reference: each NAD read in turn; the first failure ends the list."""
        out: list[Any] = []
        for key in keys:
            outcome = self.objects[key]
            if outcome == "fail":
                out.append("HTTP 500 " + key[1])
                break
            out.append(None if outcome == "absent" else key[1])
        return out


def informer_copy(networks: str | None, registry: str | None = None) -> Store:
    store = Store()
    annotations = {NETWORKS_ANNOTATION: networks} if networks is not None else {}
    if registry is not None:
        annotations[REGISTRY_ANNOTATION] = registry
    store.apply("ADDED", {"metadata": {"namespace": "ns", "name": "p", "annotations": annotations}})
    return store


def live_add(api: CountingApi, pool: ThreadPoolExecutor, store: Store) -> tuple[int, list[Any], list[Any]]:
    """What the core does: the live Pod GET, then its selections' NADs in order."""
    view = LiveView(api, Counts(), pool, store)
    began = len(api.gets)
    pod = view.get_pod("ns", "p")
    assert pod is not None
    needed = [
        ("ns", name.strip())
        for name in pod["metadata"]["annotations"][NETWORKS_ANNOTATION].split(",")
        if name
    ]
    out: list[Any] = []
    used: list[Any] = []
    try:
        for nad in view.get_nads(needed):
            out.append(None if nad is None else nad["metadata"]["name"])
            used.append(nad)
    except ApiError as exc:
        out.append("HTTP 500 " + exc.message.split("/")[-1].split(" ")[0])
    return began, out, used


NAMES = ["a", "b", "c", "d", "e"]
outcomes = st.dictionaries(
    st.sampled_from(NAMES), st.sampled_from(["ok", "absent", "fail"]), min_size=len(NAMES)
)
selections = st.lists(st.sampled_from(NAMES), max_size=5).map(",".join)


@settings(max_examples=150)
@given(outcomes=outcomes, live=selections, stale=st.one_of(st.none(), selections))
def test_for_any_informer_copy_the_answers_equal_reading_the_live_pod_s_nads_in_turn(
    pool, outcomes, live, stale
):
    api = CountingApi({("ns", name): o for name, o in outcomes.items()}, live)
    needed = [("ns", name) for name in live.split(",") if name]
    began, out, used = live_add(api, pool, informer_copy(stale))
    assert out == api.read_sequentially(needed)
    # every answer used was read after this ADD began (the Pod GET is at index `began`)
    assert all(nad["metadata"]["resourceVersion"] > began for nad in used if nad is not None)


@settings(max_examples=50)
@given(outcomes=outcomes, live=selections)
def test_a_fresh_copy_costs_one_pod_get_and_one_get_per_needed_nad(pool, outcomes, live):
    api = CountingApi({("ns", name): o for name, o in outcomes.items()}, live)
    live_add(api, pool, informer_copy(live))
    distinct = {("ns", name) for name in live.split(",") if name}
    assert sorted(api.gets) == sorted([pod_path("ns", "p"), *(nad_path(*key) for key in distinct)])


def test_a_failed_guess_the_live_pod_does_not_need_is_ignored(pool):
    api = CountingApi({A: "ok", B: "fail"}, "a")
    _, out, _ = live_add(api, pool, informer_copy("a,b"))
    assert out == ["a"]
    assert nad_path(*B) in api.gets  # it was read, and dropped


def test_a_failed_guess_the_live_pod_needs_fails_in_selection_order(pool):
    api = CountingApi({A: "absent", B: "fail", C: "fail"}, "a,b,c")
    _, out, _ = live_add(api, pool, informer_copy("c,b"))
    assert out == [None, "HTTP 500 b"]


def test_only_the_first_pod_read_starts_a_prefetch(pool):
    api = CountingApi({A: "ok"}, "a")
    view = LiveView(api, Counts(), pool, informer_copy("a"))
    view.get_pod("ns", "p")
    view.get_pod("ns", "p")  # a retry or the status write's re-read
    assert [nad["metadata"]["name"] for nad in view.get_nads([A]) if nad is not None] == ["a"]
    assert api.gets.count(nad_path(*A)) == 1
