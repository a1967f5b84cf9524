"""Which shadows a DEL without cache and without Pod may tear down, and the delegate each gives."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from cni_shim.core import shadowrebuild
from cni_shim.node.conffiles import NodeConfFiles
from sriov_contract import keys
from testbed.managed_shadows import POD_UID, managed_shadow, rendered_sriov_config

NS = "ns1"
OTHER_UID = "99999999-2222-3333-4444-555555555555"


def _shadow(**kw: Any) -> dict[str, Any]:
    return managed_shadow(namespace=NS, pod_name="pod1", **kw)["nad"]  # type: ignore[no-any-return]


def _sort(*nads: dict[str, Any]) -> shadowrebuild.Found:
    return shadowrebuild.sort(nads, NS, "pod1", POD_UID)


def test_the_selector_is_the_drivers_labels_for_the_pod() -> None:
    labels = keys.shadow_labels(POD_UID, "c", "n")
    terms = dict(t.split("=", 1) for t in shadowrebuild.selector(POD_UID).split(","))
    assert terms == {k: labels[k] for k in (keys.MANAGED_BY_LABEL, keys.POD_UID_LABEL)}


def test_this_pods_protected_shadows_are_used_in_interface_order_even_terminating() -> None:
    second = _shadow(seed="b", interface="dra1", pci="0000:03:00.2")
    first = _shadow()
    first["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # the GC deleted it, the finalizer holds
    found = _sort(second, first)
    assert found.refused == ()
    assert [(s.binding.interface, s.binding.pci_address) for s in found.usable] == [
        ("dra0", "0000:03:00.1"),
        ("dra1", "0000:03:00.2"),
    ]


def _binding(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(nad: dict[str, Any]) -> None:
        ann = nad["metadata"]["annotations"]
        ann[keys.BINDING_ANNOTATION] = json.dumps({**json.loads(ann[keys.BINDING_ANNOTATION]), **changes})

    return mutate


def _meta(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(nad: dict[str, Any]) -> None:
        nad["metadata"][key] = value

    return mutate


def _label(value: str) -> Callable[[dict[str, Any]], None]:
    def mutate(nad: dict[str, Any]) -> None:
        nad["metadata"]["labels"][keys.POD_UID_LABEL] = value

    return mutate


def _config(text: str) -> Callable[[dict[str, Any]], None]:
    def mutate(nad: dict[str, Any]) -> None:
        nad["spec"]["config"] = text

    return mutate


FORGERIES = [
    (_binding(podUID=OTHER_UID), "ManagedShadowPodMismatch"),
    (_label(OTHER_UID), "ManagedShadowPodMismatch"),
    (_meta("namespace", "ns2"), "ManagedShadowNamespaceMismatch"),
    (_meta("name", "dra-sriov-" + "0" * 32), "ManagedShadowBindingInvalid"),
    (_meta("ownerReferences", []), "ManagedShadowOwnerMismatch"),
    (
        _meta("ownerReferences", [{"apiVersion": "v1", "kind": "Pod", "name": "pod2", "uid": POD_UID}]),
        "ManagedShadowOwnerMismatch",
    ),
    (_meta("finalizers", []), "ManagedShadowUnprotected"),
    (_binding(pciAddress="0000:03:00.3"), "ManagedShadowPciMismatch"),
    (_config(rendered_sriov_config("0000:03:00.2", mtu=9000)), "ManagedShadowConfigHashMismatch"),
    (
        _config(json.dumps({"cniVersion": "1.0.0", "name": "x", "type": "host-device", "device": "eth9"})),
        "ManagedShadowConfigNotStaticSriov",
    ),
    (_meta("annotations", {}), "ManagedShadowBindingInvalid"),
]


@pytest.mark.parametrize(("mutate", "reason"), FORGERIES)
def test_a_shadow_not_exactly_this_pods_is_refused_with_the_guards_reason(
    mutate: Callable[[dict[str, Any]], None], reason: str
) -> None:
    good, bad = _shadow(), _shadow(seed="b", interface="dra1", pci="0000:03:00.2")
    mutate(bad)
    found = _sort(good, bad)
    assert [s.name for s in found.usable] == [good["metadata"]["name"]]
    assert [(name, exc.reason) for name, exc in found.refused] == [
        (f"{bad['metadata']['namespace']}/{bad['metadata']['name']}", reason)
    ]


def test_the_candidate_is_the_frozen_config_on_the_bound_interface_and_vf() -> None:
    nad = _shadow(interface="dra3")
    (shadow,) = _sort(copy.deepcopy(nad)).usable
    cand = shadowrebuild.candidate(shadow, "/nonexistent", NodeConfFiles())
    assert cand.network.raw == nad["spec"]["config"].encode()
    assert cand.selection is not None and cand.selection.interface == "dra3"
    assert (cand.name, cand.managed, cand.bound_pci) == (
        f"{NS}/{nad['metadata']['name']}",
        True,
        "0000:03:00.1",
    )
