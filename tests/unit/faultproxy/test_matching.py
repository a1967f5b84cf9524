"""The fault proxy's request parsing and rule counting, without a network."""

from __future__ import annotations

import pytest

from testbed import faults
from testbed.faults import ApiTarget, Rule, parse_target, verb_of

NS = "ai-workloads"


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/api/v1/namespaces/ns1/pods/p1", ApiTarget("", "v1", "pods", "ns1", "p1")),
        ("/api/v1/namespaces/ns1/pods/p1/status", ApiTarget("", "v1", "pods", "ns1", "p1", "status")),
        ("/api/v1/namespaces/ns1/configmaps?watch=true", ApiTarget("", "v1", "configmaps", "ns1")),
        ("/api/v1/namespaces/ns1", ApiTarget("", "v1", "namespaces", None, "ns1")),
        ("/api/v1/namespaces/ns1/finalize", ApiTarget("", "v1", "namespaces", None, "ns1", "finalize")),
        ("/api/v1/namespaces", ApiTarget("", "v1", "namespaces")),
        ("/api/v1/nodes/n1", ApiTarget("", "v1", "nodes", None, "n1")),
        (
            f"/apis/k8s.cni.cncf.io/v1/namespaces/{NS}/network-attachment-definitions/dra-sriov-x",
            ApiTarget("k8s.cni.cncf.io", "v1", "network-attachment-definitions", NS, "dra-sriov-x"),
        ),
        ("/apis/resource.k8s.io/v1/resourceslices", ApiTarget("resource.k8s.io", "v1", "resourceslices")),
        ("/api", None),
        ("/apis/resource.k8s.io/v1", None),
        ("/readyz", None),
    ],
)
def test_parse_target_follows_the_apiserver_layout(path: str, target: ApiTarget | None) -> None:
    assert parse_target(path) == target


@pytest.mark.parametrize(
    ("method", "path", "verb"),
    [
        ("GET", "/api/v1/namespaces/ns/pods/p", "get"),
        ("GET", "/api/v1/namespaces/ns/pods", "list"),
        ("GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5", "watch"),
        ("GET", "/api/v1/namespaces/ns/pods?watch=1", "watch"),
        ("GET", "/api/v1/namespaces/ns/pods?watch=false", "list"),
        ("POST", "/api/v1/namespaces/ns/pods", "create"),
        ("PUT", "/api/v1/namespaces/ns/pods/p/status", "update"),
        ("PATCH", "/api/v1/namespaces/ns/pods/p", "patch"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p", "delete"),
        ("DELETE", "/api/v1/namespaces/ns/pods", "deletecollection"),
    ],
)
def test_verb_of(method: str, path: str, verb: str) -> None:
    assert verb_of(method, path) == verb


def test_rule_filters_and_counts_only_matching_requests() -> None:
    rule = Rule(faults.conflict(), resource="pods", name="p1", after=1, times=2)
    paths = ["/api/v1/namespaces/ns/pods/p1", "/api/v1/namespaces/ns/pods/p2"] * 4
    assert [rule.offer("GET", p) for p in paths] == [False, False, True, False, True, False, False, False]
    assert (rule.seen, rule.fired, rule.exhausted) == (4, 2, True)


def test_a_taken_request_still_counts_but_does_not_fire() -> None:
    rule = Rule(faults.not_found(), verb="list", after=1, times=1)
    assert rule.offer("GET", "/api/v1/pods", taken=True) is False
    assert rule.offer("GET", "/api/v1/pods", taken=True) is False
    assert rule.offer("GET", "/api/v1/pods") is True
    assert (rule.seen, rule.fired) == (3, 1)


def test_status_faults_carry_kubernetes_reasons() -> None:
    assert [faults.status(c).reason for c in (403, 404, 409, 422, 429, 500)] == [
        "Forbidden",
        "NotFound",
        "Conflict",
        "Invalid",
        "TooManyRequests",
        "InternalError",
    ]
    assert faults.too_many_requests(retry_after=3).retry_after == 3
