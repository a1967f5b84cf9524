"""A live ADD reads a Pod's managed shadows with one LIST by their pod-UID label, yet uses exactly
what reading the live Pod's NADs one GET at a time gives.

The property tests drive the real LiveView (real thread pool, test_nad_prefetch's fake API with a
LIST endpoint added): whatever the informer copy and the live Pod's registry name, whichever NADs
carry the label, and whether the LIST fails, the answers equal reading the live Pod's NADs in
turn, errors included, and every answer used was read after the ADD began.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cni_shim.core.prefetch import LIST_FROM, Key, Listing, NadReads, nad_reads, shadow_listing
from cni_shim.core.shadowrebuild import selector
from cni_shim.errors import ApiError
from cni_shim.kube.paths import nad_path, nads_path, pod_path
from sriov_contract.keys import REGISTRY_ANNOTATION
from testbed.managed_shadows import managed_shadow, registry_annotation
from tests.unit.cni_shim.kube.test_nad_prefetch import CountingApi, informer_copy, live_add

UID = "11111111-2222-3333-4444-555555555555"
OTHER_UID = "99999999-2222-3333-4444-555555555555"
SHADOWS = [managed_shadow(namespace="ns", pod_name="p", seed=f"s{i}", interface=f"dra{i}") for i in range(4)]
SHADOW_NAMES = [s["name"] for s in SHADOWS]
ORDINARY = ["a", "b"]
NAMES = SHADOW_NAMES + ORDINARY


def registry(uid: str, names: Sequence[str]) -> str:
    return registry_annotation(uid, [s["entry"] for s in SHADOWS if s["name"] in names])


class ListingApi(CountingApi):
    """CountingApi plus the live Pod's registry and a LIST of the NADs by their pod-UID label."""

    def __init__(
        self,
        objects: dict[Key, tuple[str, str | None]],
        pod: tuple[str, str | None],
        list_fails: bool = False,
    ) -> None:
        # key -> (outcome of a GET: ok, absent or fail; the pod-UID label it carries, or None)
        super().__init__({key: outcome for key, (outcome, _) in objects.items()}, pod[0])
        self.labels = {key: label for key, (_, label) in objects.items()}
        self.registry = pod[1]
        self.list_fails = list_fails

    def get(self, path: str, what: str) -> dict[str, Any] | None:
        for uid in (UID, OTHER_UID):
            if path == nads_path("ns", selector(uid)):
                with self.lock:
                    self.gets.append(path)
                    seq = next(self.sequence)
                if self.list_fails:
                    raise ApiError(f"LIST {what} returned HTTP 500", 500)
                found = [k for k, o in self.objects.items() if o == "ok" and self.labels[k] == uid]
                return {
                    "items": [
                        {"metadata": {"namespace": k[0], "name": k[1], "resourceVersion": seq}} for k in found
                    ]
                }
        answer = super().get(path, what)
        if path == pod_path("ns", "p") and answer is not None and self.registry is not None:
            answer["metadata"]["annotations"][REGISTRY_ANNOTATION] = self.registry
        return answer


def keyed(names: Sequence[str]) -> list[Key]:
    return [("ns", n) for n in names]


# A GET that fails stands for a NAD the API server cannot answer now; only NADs it can answer
# carry a label a LIST could find them by.
objects = st.fixed_dictionaries(
    {
        ("ns", name): st.one_of(
            st.tuples(st.sampled_from(["ok", "absent"]), st.sampled_from([UID, OTHER_UID, None])),
            st.just(("fail", None)),
        )
        for name in NAMES
    }
)
pods = st.tuples(
    st.lists(st.sampled_from(NAMES), max_size=6).map(",".join),
    st.one_of(
        st.none(),
        st.builds(registry, st.sampled_from([UID, OTHER_UID]), st.lists(st.sampled_from(SHADOW_NAMES))),
    ),
)


@settings(max_examples=200)
@given(objects=objects, live=pods, copy=st.one_of(st.none(), pods), list_fails=st.booleans())
def test_for_any_registry_and_labels_the_answers_equal_reading_the_live_pod_s_nads_in_turn(
    pool, objects, live, copy, list_fails
):
    api = ListingApi(objects, live, list_fails)
    began, out, used = live_add(api, pool, informer_copy(*copy) if copy else informer_copy(None))
    assert out == api.read_sequentially(keyed([n for n in live[0].split(",") if n]))
    # every answer used was read after this ADD began (the Pod GET is at index `began`)
    assert all(nad["metadata"]["resourceVersion"] > began for nad in used if nad is not None)


def fresh(names: Sequence[str]) -> tuple[dict[Key, tuple[str, str | None]], tuple[str, str | None]]:
    """Every NAD there, the shadows labelled with the Pod's UID; a Pod selecting `names`."""
    objects: dict[Key, tuple[str, str | None]] = {("ns", n): ("ok", UID) for n in SHADOW_NAMES}
    objects.update({("ns", n): ("ok", None) for n in ORDINARY})
    return objects, (",".join(names), registry(UID, [n for n in names if n in SHADOW_NAMES]))


def test_a_fresh_copy_costs_the_pod_get_one_list_and_a_get_per_ordinary_nad(pool):
    objects, pod = fresh([*SHADOW_NAMES, "a"])
    api = ListingApi(objects, pod)
    _, out, _ = live_add(api, pool, informer_copy(*pod))
    assert out == [*SHADOW_NAMES, "a"]
    assert sorted(api.gets) == sorted(
        [pod_path("ns", "p"), nads_path("ns", selector(UID)), nad_path("ns", "a")]
    )


def test_without_a_copy_the_live_registry_lists_the_shadows_after_the_pod_get(pool):
    objects, pod = fresh(SHADOW_NAMES)
    api = ListingApi(objects, pod)
    _, out, _ = live_add(api, pool, informer_copy(None))
    assert out == SHADOW_NAMES
    assert api.gets == [pod_path("ns", "p"), nads_path("ns", selector(UID))]


def test_one_shadow_is_read_by_its_get(pool):
    objects, pod = fresh(SHADOW_NAMES[:1])
    api = ListingApi(objects, pod)
    live_add(api, pool, informer_copy(*pod))
    assert sorted(api.gets) == sorted([pod_path("ns", "p"), nad_path("ns", SHADOW_NAMES[0])])


def test_a_failed_list_leaves_each_shadow_to_its_get(pool):
    objects, pod = fresh(SHADOW_NAMES)
    api = ListingApi(objects, pod, list_fails=True)
    _, out, _ = live_add(api, pool, informer_copy(*pod))
    assert out == SHADOW_NAMES
    assert sorted(api.gets) == sorted(
        [pod_path("ns", "p"), nads_path("ns", selector(UID)), *(nad_path("ns", n) for n in SHADOW_NAMES)]
    )


def test_a_shadow_without_the_label_is_read_by_its_get(pool):
    objects, pod = fresh(SHADOW_NAMES)
    objects["ns", SHADOW_NAMES[2]] = ("ok", None)
    api = ListingApi(objects, pod)
    _, out, _ = live_add(api, pool, informer_copy(*pod))
    assert out == SHADOW_NAMES
    assert nad_path("ns", SHADOW_NAMES[2]) in api.gets
    assert nad_path("ns", SHADOW_NAMES[0]) not in api.gets


def test_a_copy_naming_another_pod_uid_costs_one_wasted_list(pool):
    objects, pod = fresh(SHADOW_NAMES)
    api = ListingApi(objects, pod)
    _, out, _ = live_add(api, pool, informer_copy(pod[0], registry(OTHER_UID, SHADOW_NAMES)))
    assert out == SHADOW_NAMES
    assert sorted(api.gets) == sorted(
        [pod_path("ns", "p"), nads_path("ns", selector(OTHER_UID)), nads_path("ns", selector(UID))]
    )


A, B, C = ("ns", "a"), ("ns", "b"), ("ns", "c")


def test_which_answers_come_from_the_list():
    assert nad_reads([A, B], set(), {A, B}) == NadReads(frozenset(), (), frozenset({A, B}))
    assert nad_reads([A, C], {A}, {A, B}) == NadReads(frozenset({A}), (C,), frozenset())  # a GET answer wins
    assert nad_reads([C, B, C], set(), {B}) == NadReads(frozenset(), (C,), frozenset({B}))  # the rest, once


def test_the_listing_is_the_registry_s_shadows_in_the_pod_s_namespace():
    text = registry(UID, SHADOW_NAMES[:LIST_FROM])
    assert shadow_listing(text, "ns") == Listing(
        "ns", selector(UID), frozenset(keyed(SHADOW_NAMES[:LIST_FROM]))
    )
    assert shadow_listing(text, "elsewhere") is None
    assert shadow_listing(registry(UID, SHADOW_NAMES[:1]), "ns") is None
    assert shadow_listing(registry("not a label, value", SHADOW_NAMES), "ns") is None
    assert shadow_listing("{not json", "ns") is None
    assert shadow_listing('{"podUID": "u", "entries": [1]}', "ns") is None
    assert shadow_listing(None, "ns") is None
