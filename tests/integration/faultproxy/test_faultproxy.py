"""The fault proxy against the real kube-apiserver, seen by the official client and by http.client.

Every fault kind must look to a client exactly like the real thing, and "response lost" must
really have happened on the server: that is what later fault tests of the driver rely on.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from testbed import faults
from testbed.faultproxy import FaultProxy
from testbed.waiting import wait_for

pytestmark = pytest.mark.integration

ProxyFactory = Callable[..., FaultProxy]


@pytest.fixture
def admin_proxy(fault_proxy: ProxyFactory) -> FaultProxy:
    return fault_proxy("admin")


@pytest.fixture
def core_via(admin_proxy: FaultProxy) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(config_file=str(admin_proxy.kubeconfig))
    yield client.CoreV1Api(api)
    api.close()


@pytest.fixture
def core_direct(testbed: Any) -> client.CoreV1Api:
    return client.CoreV1Api(testbed.api_client)


def _configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def _typed(name: str) -> client.V1ConfigMap:
    return client.V1ConfigMap.model_validate(_configmap(name))


def _raw(
    proxy: FaultProxy, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 10.0
) -> tuple[http.client.HTTPResponse, bytes]:
    """One request with nothing but the standard library, like the CNI shim's own reader."""
    conn = http.client.HTTPSConnection(
        "127.0.0.1",
        proxy.port,
        context=ssl.create_default_context(cafile=str(proxy.ca_file)),
        timeout=timeout,
    )
    try:
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp, resp.read()
    finally:
        conn.close()


def _exists(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_passes_through_as_the_proxied_identity(fault_proxy: ProxyFactory, k8s_namespace: str) -> None:
    proxy = fault_proxy("driver")
    api = config.new_client_from_config(config_file=str(proxy.kubeconfig))
    try:
        with pytest.raises(ApiException) as raised:
            client.CoreV1Api(api).list_namespaced_config_map(k8s_namespace)
    finally:
        api.close()
    # The real authorizer refused the driver's user: the proxy did not act as anyone else.
    assert raised.value.status == 403
    assert 'User "sriov-dra-driver"' in json.loads(str(raised.value.body))["message"]
    (seen,) = proxy.requests
    assert (seen.verb, seen.status, seen.fault) == ("list", 403, None)
    assert seen.target == faults.ApiTarget("", "v1", "configmaps", k8s_namespace)


STATUS_FAULTS = [
    (faults.forbidden(), 403, "Forbidden"),
    (faults.not_found(), 404, "NotFound"),
    (faults.conflict(), 409, "Conflict"),
    (faults.conflict("AlreadyExists"), 409, "AlreadyExists"),
    (faults.invalid(), 422, "Invalid"),
    (faults.internal_error(), 500, "InternalError"),
    (faults.too_many_requests(retry_after=7), 429, "TooManyRequests"),
]


@pytest.mark.parametrize(
    ("fault", "code", "reason"), STATUS_FAULTS, ids=[f"{c}-{r}" for _, c, r in STATUS_FAULTS]
)
def test_status_fault_seen_by_both_clients(
    admin_proxy: FaultProxy,
    core_via: client.CoreV1Api,
    core_direct: client.CoreV1Api,
    k8s_namespace: str,
    fault: faults.Fault,
    code: int,
    reason: str,
) -> None:
    rule = admin_proxy.add_rule(fault, verb="create", resource="configmaps", namespace=k8s_namespace, times=2)

    with pytest.raises(ApiException) as raised:
        core_via.create_namespaced_config_map(k8s_namespace, _typed("via-client"))
    status = json.loads(str(raised.value.body))
    assert (raised.value.status, status["kind"], status["reason"], status["code"]) == (
        code,
        "Status",
        reason,
        code,
    )

    resp, body = _raw(
        admin_proxy, "POST", f"/api/v1/namespaces/{k8s_namespace}/configmaps", _configmap("via-stdlib")
    )
    assert (resp.status, json.loads(body)["reason"]) == (code, reason)
    if code == 429:
        assert dict(raised.value.headers or {})["Retry-After"] == "7"
        assert resp.getheader("Retry-After") == "7"
        assert json.loads(body)["details"]["retryAfterSeconds"] == 7

    # Injected statuses never reach the apiserver, and the rule stops after its two firings.
    assert not _exists(core_direct, k8s_namespace, "via-client")
    assert not _exists(core_direct, k8s_namespace, "via-stdlib")
    assert rule.exhausted
    core_via.create_namespaced_config_map(k8s_namespace, _typed("via-client"))
    assert [(r.status, r.fault) for r in admin_proxy.requests_for(verb="create")] == [
        (code, f"status {code}"),
        (code, f"status {code}"),
        (201, None),
    ]


def test_timeout_never_answers_and_does_not_forward(
    admin_proxy: FaultProxy, core_via: client.CoreV1Api, core_direct: client.CoreV1Api, k8s_namespace: str
) -> None:
    admin_proxy.add_rule(faults.timeout(hold=60), verb="create", resource="configmaps")

    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core_via.create_namespaced_config_map(k8s_namespace, _typed("held"), _request_timeout=1)
    with pytest.raises(TimeoutError):
        _raw(
            admin_proxy,
            "POST",
            f"/api/v1/namespaces/{k8s_namespace}/configmaps",
            _configmap("held"),
            timeout=1,
        )
    # Both clients gave up on their own 1 s timeouts, long before the proxy's 60 s hold.
    assert time.monotonic() - started < 30
    assert not _exists(core_direct, k8s_namespace, "held")
    assert [(r.status, r.fault) for r in admin_proxy.requests_for(verb="create")] == [(None, "timeout")] * 2


def test_response_lost_really_created_the_object(
    admin_proxy: FaultProxy, core_via: client.CoreV1Api, core_direct: client.CoreV1Api, k8s_namespace: str
) -> None:
    admin_proxy.add_rule(faults.response_lost(), verb="create", resource="configmaps", times=2)

    with pytest.raises(urllib3.exceptions.ProtocolError):
        core_via.create_namespaced_config_map(k8s_namespace, _typed("lost-client"))
    with pytest.raises(http.client.RemoteDisconnected):
        _raw(admin_proxy, "POST", f"/api/v1/namespaces/{k8s_namespace}/configmaps", _configmap("lost-stdlib"))

    assert core_direct.read_namespaced_config_map("lost-client", k8s_namespace).data == {"k": "v"}
    assert core_direct.read_namespaced_config_map("lost-stdlib", k8s_namespace).data == {"k": "v"}
    # The apiserver's answer is recorded although no client ever saw it.
    assert [(r.status, r.fault) for r in admin_proxy.requests_for(verb="create")] == [
        (201, "response-lost")
    ] * 2
    # A retried create now meets the object it already made: the case callers must handle.
    with pytest.raises(ApiException) as raised:
        core_via.create_namespaced_config_map(k8s_namespace, _typed("lost-client"))
    assert raised.value.status == 409


def test_reset_aborts_without_forwarding(
    admin_proxy: FaultProxy, core_via: client.CoreV1Api, core_direct: client.CoreV1Api, k8s_namespace: str
) -> None:
    admin_proxy.add_rule(faults.reset(), verb="create", resource="configmaps")

    with pytest.raises(urllib3.exceptions.ProtocolError) as raised:
        core_via.create_namespaced_config_map(k8s_namespace, _typed("reset"))
    assert isinstance(raised.value.args[1], ConnectionResetError)
    with pytest.raises(ConnectionResetError):
        _raw(admin_proxy, "POST", f"/api/v1/namespaces/{k8s_namespace}/configmaps", _configmap("reset"))
    assert not _exists(core_direct, k8s_namespace, "reset")


def test_nth_request_only_and_runtime_rule_changes(admin_proxy: FaultProxy, k8s_namespace: str) -> None:
    path = f"/api/v1/namespaces/{k8s_namespace}/configmaps"
    rule = admin_proxy.add_rule(faults.internal_error(), method="GET", path=r"/configmaps$", nth=2)
    statuses = [_raw(admin_proxy, "GET", path)[0].status for _ in range(3)]
    assert statuses == [200, 500, 200]
    assert (rule.seen, rule.fired) == (3, 1)

    added = admin_proxy.add_rule(faults.not_found(), verb="list")
    assert _raw(admin_proxy, "GET", path)[0].status == 404
    admin_proxy.remove_rule(added)
    assert _raw(admin_proxy, "GET", path)[0].status == 200
    admin_proxy.clear()
    assert admin_proxy.requests == [] and admin_proxy.rules == []


def test_watch_streams_incrementally(
    admin_proxy: FaultProxy, core_via: client.CoreV1Api, core_direct: client.CoreV1Api, k8s_namespace: str
) -> None:
    # If the proxy buffered the stream, the event would only arrive when the 60 s watch ends.
    def create_once_watching() -> None:
        wait_for(lambda: admin_proxy.requests_for(verb="watch"), 20, what="the watch through the proxy")
        core_direct.create_namespaced_config_map(k8s_namespace, _typed("watched"))

    creator = threading.Thread(target=create_once_watching)
    creator.start()
    started = time.monotonic()
    seen = None
    stream = watch.Watch()
    for event in stream.stream(core_via.list_namespaced_config_map, k8s_namespace, timeout_seconds=60):
        if event["type"] == "ADDED" and event["object"].metadata.name == "watched":
            seen = time.monotonic() - started
            stream.stop()
    creator.join()
    assert seen is not None and seen < 30, faults.faults_summary(admin_proxy.requests)
    assert any(r.verb == "watch" and r.status == 200 for r in admin_proxy.requests)


@pytest.mark.parametrize("fault", [faults.reset(), faults.response_lost()], ids=["reset", "response-lost"])
def test_official_client_silently_retries_a_dropped_read(
    admin_proxy: FaultProxy,
    core_via: client.CoreV1Api,
    core_direct: client.CoreV1Api,
    k8s_namespace: str,
    fault: faults.Fault,
) -> None:
    # urllib3's default Retry re-sends idempotent methods after a dropped connection, so a single
    # dropped GET never reaches the caller; fault tests on reads must drop more than one request.
    core_direct.create_namespaced_config_map(k8s_namespace, _typed("read-me"))
    admin_proxy.add_rule(fault, verb="get", resource="configmaps", times=1)
    assert core_via.read_namespaced_config_map("read-me", k8s_namespace).data == {"k": "v"}
    assert [r.fault for r in admin_proxy.requests_for(verb="get")] == [fault.describe(), None]


def test_delay_forwards_late(admin_proxy: FaultProxy, core_via: client.CoreV1Api, k8s_namespace: str) -> None:
    admin_proxy.add_rule(faults.delay(1.5), verb="create", resource="configmaps", times=1)
    started = time.monotonic()
    created = core_via.create_namespaced_config_map(k8s_namespace, _typed("late"))
    assert time.monotonic() - started >= 1.5
    assert created.metadata is not None and created.metadata.name == "late"
    assert [(r.status, r.fault) for r in admin_proxy.requests_for(verb="create")] == [(201, "delay")]
