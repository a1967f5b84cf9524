"""Which NAD events wake the node-policy controller (spec 12.2.6)."""

from __future__ import annotations

from sriov_operator.controllers.nodepolicy import NadFilter

MARKER = {"sriovnetwork.openshift.io/owner-ref": "SriovNetwork.sriovnetwork.openshift.io/ops/a"}


def nad(name: str, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    return {
        "metadata": {
            "namespace": "ai",
            "name": name,
            "annotations": annotations or {},
            "labels": labels or {},
        }
    }


def test_pod_shadows_never_wake_it_even_when_referenced() -> None:
    f = NadFilter()
    f.referenced = {("ai", "s")}
    shadow = nad("s", MARKER, {"sriovnetwork.k8snetworkplumbingwg.io/managed-by": "sriov-dra-driver"})
    assert not f.wants("ADDED", shadow)


def test_referenced_and_marked_nads_wake_it_and_marker_removal_is_remembered() -> None:
    f = NadFilter()
    f.referenced = {("ai", "ref")}
    assert f.wants("MODIFIED", nad("ref"))
    assert not f.wants("ADDED", nad("unrelated"))
    assert f.wants("ADDED", nad("a", MARKER))
    # The new object has no marker any more; the old one had: still relevant (invalidation).
    assert f.wants("MODIFIED", nad("a"))
    assert not f.wants("MODIFIED", nad("a"))
    assert f.wants("ADDED", nad("b", MARKER)) and f.wants("DELETED", nad("b", MARKER))
    assert not f.wants("MODIFIED", nad("b"))
    assert f.wants("RELIST", {})
