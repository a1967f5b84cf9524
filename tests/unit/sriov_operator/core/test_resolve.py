"""Reference resolution (spec 12.2.3): every way a source can be unready has its own outcome."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from sriov_operator.core.attributes import NetworkRef
from sriov_operator.core.resolve import SourceNad, resolve
from sriov_operator.core.sourcenad import desired_nad
from sriov_operator.reasons import (
    SOURCE_ACCESS_DENIED,
    SOURCE_NAD_NOT_READY,
    SRIOV_NETWORK_NOT_FOUND,
    SRIOV_NETWORK_NOT_READY,
    fail,
)
from tests.unit.sriov_operator.core.conftest import IPAM_A, OPS, network

REF = NetworkRef(OPS, "rail-a-net")


class Reader:
    def __init__(
        self, net: Mapping[str, Any] | None, nad: Mapping[str, Any] | None, deny: bool = False
    ) -> None:
        self.net, self.nad, self.deny = net, nad, deny
        self.nad_reads: list[tuple[str, str]] = []

    def get_network(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        if self.deny:
            raise fail(SOURCE_ACCESS_DENIED, "forbidden")
        return self.net if name == REF.name else None

    def get_nad(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.nad_reads.append((namespace, name))
        return self.nad


def healthy(**spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    net = network(networkNamespace="ai-workloads", ipam=IPAM_A, **spec)
    return net, desired_nad(net, "openshift.io")


def outcome(net: Any, nad: Any, deny: bool = False) -> str:
    try:
        resolve(REF, Reader(net, nad, deny), operator_namespace=OPS)
    except Exception as exc:
        return str(getattr(exc, "reason", exc))
    return "resolved"


def test_a_ready_network_resolves_to_its_rendered_target_not_its_own_namespace() -> None:
    net, nad = healthy()
    reader = Reader(net, nad)
    assert resolve(REF, reader, operator_namespace=OPS) == SourceNad("ai-workloads", "rail-a-net")
    assert reader.nad_reads == [("ai-workloads", "rail-a-net")]


def test_a_same_namespace_network_resolves_there() -> None:
    net = network()
    assert resolve(REF, Reader(net, desired_nad(net, "")), operator_namespace=OPS) == SourceNad(
        OPS, "rail-a-net"
    )


def test_resource_names_take_no_part() -> None:
    net, nad = healthy()
    other = copy.deepcopy(net)
    other["spec"]["resourceName"] = "something_else"
    assert outcome(other, nad) == "resolved"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda net, nad: (None, nad), SRIOV_NETWORK_NOT_FOUND),
        (lambda net, nad: ({**net, "metadata": {**net["metadata"], "deletionTimestamp": "t"}}, nad), SRIOV_NETWORK_NOT_READY),
        (lambda net, nad: (network(ready=None, networkNamespace="ai-workloads", ipam=IPAM_A), nad), SRIOV_NETWORK_NOT_READY),
        (lambda net, nad: (network(ready="False", networkNamespace="ai-workloads", ipam=IPAM_A), nad), SRIOV_NETWORK_NOT_READY),
        (lambda net, nad: (network(generation=2, observed=1, networkNamespace="ai-workloads", ipam=IPAM_A), nad), SRIOV_NETWORK_NOT_READY),
        (lambda net, nad: (net, None), SOURCE_NAD_NOT_READY),
        (lambda net, nad: (net, {**nad, "metadata": {**nad["metadata"], "deletionTimestamp": "t"}}), SOURCE_NAD_NOT_READY),
        (lambda net, nad: (net, {**nad, "metadata": {**nad["metadata"], "annotations": {}}}), SOURCE_NAD_NOT_READY),
        (lambda net, nad: (net, {**nad, "spec": {"config": nad["spec"]["config"].replace("192.0.2", "10.0.0")}}), SOURCE_NAD_NOT_READY),
    ],
    ids=["missing", "deleting", "no-ready", "ready-false", "stale-generation", "nad-missing", "nad-deleting",
         "marker-removed", "content-changed"],
)  # fmt: skip
def test_each_unready_source_has_its_reason(change, reason) -> None:
    net, nad = healthy()
    assert outcome(*change(net, nad)) == reason


def test_other_conditions_are_not_mistaken_for_ready() -> None:
    net, nad = healthy()
    net["status"]["conditions"].insert(0, {"type": "Degraded", "status": "True"})
    assert outcome(net, nad) == "resolved"


def test_a_redirect_outside_the_operator_namespace_is_never_usable() -> None:
    net = network("rail-a-net", OPS, networkNamespace="ai")
    net["metadata"]["namespace"] = "apps"
    with pytest.raises(Exception) as caught:
        resolve(NetworkRef("apps", "rail-a-net"), Reader(net, None), operator_namespace=OPS)
    assert getattr(caught.value, "reason", "") == SRIOV_NETWORK_NOT_READY


def test_access_denied_propagates() -> None:
    assert outcome(None, None, deny=True) == SOURCE_ACCESS_DENIED


def test_a_nad_owned_by_a_replaced_network_uid_is_not_ready() -> None:
    net = network()
    nad = desired_nad(network(uid="old-uid"), "")
    assert outcome(net, nad) == SOURCE_NAD_NOT_READY


def test_a_network_that_no_longer_renders_is_not_ready() -> None:
    net, nad = healthy()
    net["spec"]["ipam"] = "{"
    assert outcome(net, nad) == SRIOV_NETWORK_NOT_READY
