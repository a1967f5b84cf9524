"""Every API adapter call fails as an ApiError from the one mapping (status, retryable, reason)."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest
from kubernetes import client

from sriov_dra.apierrors import ApiError
from sriov_dra.kube.resources import KubeClaims, KubePolicySource, KubeSlices
from tests.support.httpjson import send_json

CLAIM = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
POLICIES = "/apis/sriovnetwork.k8snetworkplumbingwg.io/v1alpha1/namespaces/drv/sriovresourcepolicies"
NODE = "/api/v1/nodes/n1"

# (method, path) -> (status, body); anything else is a 404 Status.
ANSWERS: dict[tuple[str, str], tuple[int, object]] = {}


class _Api(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        status, body = ANSWERS.get(
            (self.command, self.path.split("?")[0]), (404, {"kind": "Status", "message": "not found"})
        )
        send_json(self, status, body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[client.ApiClient]:
    ANSWERS.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}"))
    server.shutdown()
    server.server_close()


def _refused(message: str, code: int) -> tuple[int, object]:
    return code, {"kind": "Status", "message": message, "code": code}


def test_a_claim_read_keeps_its_reasons_and_gains_the_status(api: client.ApiClient) -> None:
    ANSWERS[("GET", CLAIM)] = (200, {"metadata": {"name": "c", "uid": "u"}})
    assert KubeClaims(api).get_claim("ns", "c")["metadata"]["uid"] == "u"
    ANSWERS.clear()
    with pytest.raises(ApiError) as missing:
        KubeClaims(api).get_claim("ns", "c")
    assert (missing.value.reason, missing.value.status, missing.value.retryable) == (
        "ClaimNotFound",
        404,
        False,
    )
    ANSWERS[("GET", CLAIM)] = _refused("resourceclaims is forbidden", 403)
    with pytest.raises(ApiError) as refused:
        KubeClaims(api).get_claim("ns", "c")
    assert (refused.value.reason, refused.value.status) == ("ClaimReadFailed", 403)
    assert "GET ResourceClaim ns/c failed with HTTP 403: resourceclaims is forbidden" in refused.value.message


def test_a_claim_read_without_an_answer_has_an_unknown_outcome() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}"))
    api.configuration.retries = 0
    with pytest.raises(ApiError) as err:
        KubeClaims(api).get_claim("ns", "c")
    assert (err.value.reason, err.value.status, err.value.outcome_unknown) == ("ClaimReadFailed", 0, True)


def test_slices_map_failures_and_a_vanished_slice_is_deleted(api: client.ApiClient) -> None:
    slices = KubeSlices(api, "n1")
    ANSWERS[("GET", SLICES)] = (200, {"items": [{"metadata": {"name": "s0"}}]})
    ANSWERS[("POST", SLICES)] = (201, {"metadata": {"name": "s1"}})
    ANSWERS[("PUT", f"{SLICES}/s0")] = _refused("the object has been modified", 409)
    assert slices.list() == [{"metadata": {"name": "s0"}}]
    slices.create({"metadata": {"name": "s1"}})
    slices.delete("gone")
    with pytest.raises(ApiError) as conflict:
        slices.replace("s0", {"metadata": {"name": "s0"}})
    assert (conflict.value.reason, conflict.value.status, conflict.value.retryable) == ("Conflict", 409, True)
    ANSWERS[("DELETE", f"{SLICES}/s0")] = _refused("forbidden", 403)
    with pytest.raises(ApiError) as denied:
        slices.delete("s0")
    assert denied.value.reason == "AccessDenied"


def test_policies_and_the_node_map_failures(api: client.ApiClient) -> None:
    source = KubePolicySource(api, "drv", "n1")
    ANSWERS[("GET", POLICIES)] = _refused("etcd timeout", 500)
    with pytest.raises(ApiError) as failed:
        source.policies()
    assert (failed.value.reason, failed.value.outcome_unknown) == ("ApiRequestFailed", True)
    with pytest.raises(ApiError) as missing:
        source.node()
    assert (missing.value.reason, missing.value.status) == ("NotFound", 404)
    ANSWERS[("GET", NODE)] = (200, {"metadata": {"name": "n1", "uid": "nu", "labels": {"a": "b"}}})
    assert source.node() == ("nu", {"a": "b"})
