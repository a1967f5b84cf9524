"""Kubernetes API adapters for the node agent (official client, plain JSON-shaped dicts)."""

from __future__ import annotations

import codecs
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final
from urllib.parse import quote

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError
from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, NODE_UID_LABEL
from sriov_dra import reasons
from sriov_dra.apierrors import NOT_FOUND, ApiError, api_error
from sriov_dra.model import DRA_GROUP, DRA_VERSION, DRIVER_NAME, NAD_GROUP, POLICY_GROUP, POLICY_VERSION

log = logging.getLogger(__name__)

# The client's default is no timeout at all: a black-holed connection would hold the claim and
# Pod locks (and every later kubelet retry waiting on them) until TCP gives up. Bounded well
# below kubelet's 45 s call deadline, so kubelet gets our reasoned "no response" error instead.
REQUEST_TIMEOUT_S: Final = 15.0
# Bytes read from a streamed list response at a time: what our side holds of a list, whatever
# its length, is this plus the item being looked at (a shadow is about 2.3 KiB of JSON).
STREAM_CHUNK: Final = 256 * 1024
# A list's items as PartialObjectMetadata, or else the full objects.
METADATA_LIST: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


def _items(result: Any) -> list[dict[str, Any]]:
    return list(result.get("items") or [])


class KubeClaims:
    """Live ResourceClaim reads and status updates (resource.k8s.io/v1)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    @staticmethod
    def _path(namespace: str, name: str) -> str:
        return f"/apis/{DRA_GROUP}/{DRA_VERSION}/namespaces/{quote(namespace)}/resourceclaims/{quote(name)}"

    def patch_claim_status(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON Patch of the status subresource. Not an update: the client cannot reproduce the
        stored bytes of the allocation's opaque parameters, which the server compares as immutable."""
        path = f"{self._path(namespace, name)}/status"
        return _json_patch(self._api, path, f"ResourceClaim {namespace}/{name} status", ops)

    def list_claims(self) -> Iterator[dict[str, Any]]:
        """Every ResourceClaim in one request: a claim has no field naming its node, and one
        cluster-wide list is cheaper for the API server than one per namespace."""
        path = f"/apis/{DRA_GROUP}/{DRA_VERSION}/resourceclaims"
        return list_streamed(self._api, path, "ResourceClaims", [])

    def get_claim(self, namespace: str, name: str) -> Mapping[str, Any]:
        what = f"ResourceClaim {namespace}/{name}"
        claim = _request(
            self._api, "GET", self._path(namespace, name), what, reason=reasons.CLAIM_READ_FAILED
        )
        if claim is None:
            raise api_error(NOT_FOUND, "GET", what, reason=reasons.CLAIM_NOT_FOUND)
        return claim


def _send(
    api: client.ApiClient,
    method: str,
    path: str,
    what: str,
    *,
    body: Any = None,
    content_type: str = "application/json",
    query: list[tuple[str, str]] | None = None,
    reason: str | None = None,
    accept: str = "application/json",
) -> Any:
    """One raw API call; returns the response with its body still unread. A transport failure
    becomes an ApiError with status 0: outcome unknown. `reason` as for api_error."""
    headers = {"Accept": accept, "Content-Type": content_type}
    m, url, hdrs, data, _ = api.param_serialize(
        method, path, query_params=query, header_params=headers, body=body, auth_settings=["BearerToken"]
    )
    try:
        return api.call_api(m, url, header_params=hdrs, body=data, _request_timeout=REQUEST_TIMEOUT_S)
    except ApiException as exc:
        raise api_error(int(exc.status or 0), method, what, str(exc.reason or ""), reason=reason) from None
    except Exception as exc:  # urllib3 connection errors: no answer, the outcome is unknown
        raise api_error(0, method, what, exc.__class__.__name__, reason=reason) from None


def _read(resp: Any, method: str, what: str, reason: str | None = None) -> bytes:
    try:
        return bytes(resp.read())
    except Exception as exc:  # the connection broke mid-body
        raise api_error(0, method, what, exc.__class__.__name__, reason=reason) from None


def _failure(status: int, raw: bytes, method: str, what: str, reason: str | None = None) -> ApiError:
    try:
        detail = str(json.loads(raw).get("message", ""))
    except ValueError:
        detail = raw[:200].decode(errors="replace")
    return api_error(status, method, what, detail, reason=reason)


def _request(
    api: client.ApiClient, method: str, path: str, what: str, *, reason: str | None = None, **options: Any
) -> dict[str, Any] | None:
    """One raw API call (`options` as for _send) returning the object as API JSON (camelCase, no
    model conversion), None for a 404 on reads, or an ApiError. A transport failure becomes
    status 0: outcome unknown. Every API call of this module ends here or in list_streamed, so
    this is where failures are mapped; `reason` as for api_error."""
    resp = _send(api, method, path, what, reason=reason, **options)
    raw = _read(resp, method, what, reason)
    if resp.status == NOT_FOUND and method in ("GET", "DELETE"):
        return None
    if resp.status >= 400:
        raise _failure(resp.status, raw, method, what, reason)
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise api_error(resp.status, method, what, "the response is not a JSON object", reason=reason)
    return obj


def _required(obj: dict[str, Any] | None, verb: str, what: str) -> dict[str, Any]:
    if obj is None:
        raise api_error(NOT_FOUND, verb, what)
    return obj


def _json_patch(api: client.ApiClient, path: str, what: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
    """An RFC 6902 patch; its `test` ops make it fail (422) instead of writing over a change."""
    sent = _request(api, "PATCH", path, what, body=ops, content_type="application/json-patch+json")
    return _required(sent, "PATCH", what)


_BLANK: Final = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL: Final = re.compile(r"[0-9.eE+-]*")
_DECODER: Final = json.JSONDecoder()


class _Text:
    """Byte chunks as one str, decoded as they arrive; text before `pos` is dropped on refill."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._ended = False
        self.buf = ""
        self.pos = 0

    def refill(self) -> bool:
        """Append the next chunk; False once the input has ended."""
        if self._ended:
            return False
        chunk = next(self._chunks, None)
        self._ended = chunk is None
        self.buf = self.buf[self.pos :] + self._utf8.decode(chunk or b"", final=self._ended)
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-blank character, not consumed ("" at the end of the input)."""
        while True:
            self.pos = _BLANK.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.refill():
                return ""

    def expect(self, allowed: str) -> str:
        found = self.peek()
        if not found or found not in allowed:
            raise ValueError(f"expected one of {allowed!r}, found {found or 'the end'!r}")
        self.pos += 1
        return found

    def value(self) -> Any:
        """The next complete JSON value."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if not self.refill():
                    raise
                continue
            # A number may go on in the next chunk (12|34, 12.|5, 1e|5): only what follows it here
            # (a blank, a comma or a bracket) proves it ended.
            if _NUMBER_TAIL.match(self.buf, end).end() < len(self.buf) or not self.refill():  # type: ignore[union-attr]
                self.pos = end
                return value


def _elements(text: _Text) -> Iterator[Any]:
    text.expect("[")
    if text.peek() == "]":
        text.pos += 1
        return
    while True:
        yield text.value()
        if text.expect(",]") == "]":
            return


def stream_items(chunks: Iterable[bytes], key: str = "items") -> Iterator[Any]:
    """The elements of the top-level JSON object's `key` array, each decoded as soon as its bytes
    have arrived; the rest of the document is checked for syntax and dropped. Raises ValueError
    for anything that is not one well-formed JSON object."""
    text = _Text(chunks)
    text.expect("{")
    end = text.peek() == "}"
    if end:
        text.pos += 1
    while not end:
        name = text.value()
        if not isinstance(name, str):
            raise ValueError("an object key is not a string")
        text.expect(":")
        if name == key and text.peek() == "[":
            yield from _elements(text)
        else:
            text.value()
        end = text.expect(",}") == "}"
    if text.peek():
        raise ValueError("text follows the JSON object")


def list_streamed(
    api: client.ApiClient,
    path: str,
    what: str,
    query: list[tuple[str, str]],
    accept: str = "application/json",
) -> Iterator[dict[str, Any]]:
    """Every item of one list request as API JSON, decoded while the response streams in.

    One request is one consistent snapshot and the API server's cheapest list: paged by `limit`
    it cost kube-apiserver 1.36 six to ten times the CPU (8000 shadows, pages of 500: 3.4-6.6 s
    against 0.5 s), and the wall time with it. Memory on our side stays
    bounded all the same, because no more than a chunk of the response is held at a time. The
    request goes out now and the items are read as the caller iterates, so whatever the caller
    does in between overlaps the API server's work."""
    resp = _send(api, "GET", path, what, query=query, accept=accept)
    if resp.status >= 400:
        raise _failure(resp.status, _read(resp, "GET", what), "GET", what)
    return _items_of(resp, what)


def _items_of(resp: Any, what: str) -> Iterator[dict[str, Any]]:
    finished = False
    try:
        # read(n) waits for n bytes (or the end), where stream() would hand over every HTTP chunk
        # of a few KiB, each costing a failed decode of the item it cuts in two.
        for item in stream_items(iter(lambda: resp.response.read(STREAM_CHUNK), b"")):
            if not isinstance(item, dict):
                raise ValueError("a list item is not a JSON object")
            yield item
        finished = True
    except ValueError as exc:
        raise api_error(resp.status, "GET", what, f"the response is not a JSON list: {exc}") from None
    except Exception as exc:  # the connection broke mid-body: the listing is incomplete
        raise api_error(0, "GET", what, exc.__class__.__name__) from None
    finally:
        if not finished:
            resp.response.close()  # unread bytes must not go back to the connection pool


class KubePods:
    """Live Pod reads and JSON Patches (no update, no delete: the driver has no such rights)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        return _request(self._api, "GET", path, f"Pod {namespace}/{name}")

    def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
        return _json_patch(self._api, path, f"Pod {namespace}/{name}", ops)

    def list_node_pods(self, node_name: str) -> Iterator[dict[str, Any]]:
        """Metadata only where the API server can (a PartialObjectMetadataList: less than half the
        bytes to encode and decode), the full Pods where it cannot: content negotiation falls back
        to the second type, and either serves the repair pass, which reads only metadata."""
        return list_streamed(
            self._api,
            "/api/v1/pods",
            f"Pods on {node_name}",
            [("fieldSelector", f"spec.nodeName={node_name}")],
            accept=METADATA_LIST,
        )


class KubeNads:
    """NetworkAttachmentDefinitions on their main endpoint (the CRD has no finalizers subresource)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    @staticmethod
    def _path(namespace: str, name: str = "") -> str:
        base = f"/apis/k8s.cni.cncf.io/v1/namespaces/{quote(namespace)}/network-attachment-definitions"
        return f"{base}/{quote(name)}" if name else base

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        return _request(
            self._api, "GET", self._path(namespace, name), f"NetworkAttachmentDefinition {namespace}/{name}"
        )

    def create_nad(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        what = f"NetworkAttachmentDefinition {meta['namespace']}/{meta['name']}"
        return _required(
            _request(self._api, "POST", self._path(meta["namespace"]), what, body=dict(body)), "POST", what
        )

    def delete_nad(self, namespace: str, name: str, uid: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        what = f"NetworkAttachmentDefinition {namespace}/{name} (UID {uid})"
        _request(self._api, "DELETE", self._path(namespace, name), what, body=body)

    def patch_nad(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        return _json_patch(
            self._api, self._path(namespace, name), f"NetworkAttachmentDefinition {namespace}/{name}", ops
        )


class KubeShadowLister:
    """Managed shadows of one node across all namespaces, found by their labels (spec 8.5: listing
    only the checkpoint's namespaces would miss orphans)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._objs = client.CustomObjectsApi(api)

    @staticmethod
    def selector(node_uid: str) -> str:
        return f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{NODE_UID_LABEL}={node_uid}"

    def list_shadows(self, node_uid: str) -> Iterator[dict[str, Any]]:
        return list_streamed(
            self._api,
            "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions",
            "NetworkAttachmentDefinitions (managed shadows)",
            [("labelSelector", self.selector(node_uid))],
        )

    def watch_source(self, node_uid: str) -> tuple[str, Callable[..., Any], dict[str, Any]]:
        """(description, list function, kwargs) for watch_forever: any change to our shadows."""
        return (
            "managed shadows",
            self._objs.list_cluster_custom_object,
            {
                "group": NAD_GROUP,
                "version": "v1",
                "plural": "network-attachment-definitions",
                "label_selector": self.selector(node_uid),
            },
        )


class KubeEvents:
    """core/v1 Events (the EventSink of sriov_dra.observe.events)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        path = f"/api/v1/namespaces/{quote(namespace)}/events"
        _request(self._api, "POST", path, f"Event in {namespace}", body=dict(body))


class KubeAccess:
    """What the API server serves, and what the current credentials may do (preflight)."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api

    def served_resources(self, group_version: str) -> set[str]:
        """Resource names served under /apis/<group_version>; empty when the group is not served."""
        try:
            listing = _request(self._api, "GET", f"/apis/{group_version}", f"API group {group_version}")
        except ReasonedError:
            return set()
        return {str(r.get("name")) for r in (listing or {}).get("resources") or []}

    def may(self, attributes: Mapping[str, str]) -> bool:
        """A SelfSubjectAccessReview of `attributes` (verb, group, resource, ...)."""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": dict(attributes)},
        }
        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        answer = _request(self._api, "POST", path, "SelfSubjectAccessReview", body=body) or {}
        return bool((answer.get("status") or {}).get("allowed"))


class KubeSlices:
    """This node's ResourceSlices of this driver."""

    _PATH: Final = f"/apis/{DRA_GROUP}/{DRA_VERSION}/resourceslices"

    def __init__(self, api: client.ApiClient, node_name: str) -> None:
        self._api = api
        self.selector = f"spec.nodeName={node_name},spec.driver={DRIVER_NAME}"

    def list(self) -> list[dict[str, Any]]:
        what = "ResourceSlices of this node"
        listing = _request(self._api, "GET", self._PATH, what, query=[("fieldSelector", self.selector)])
        return _items(_required(listing, "GET", what))

    def create(self, body: Mapping[str, Any]) -> None:
        what = f"ResourceSlice {(body.get('metadata') or {}).get('name', '')}"
        _request(self._api, "POST", self._PATH, what, body=dict(body))

    def replace(self, name: str, body: Mapping[str, Any]) -> None:
        _request(self._api, "PUT", f"{self._PATH}/{quote(name)}", f"ResourceSlice {name}", body=dict(body))

    def delete(self, name: str) -> None:
        """Deletes the slice; one that is already gone is no failure."""
        _request(self._api, "DELETE", f"{self._PATH}/{quote(name)}", f"ResourceSlice {name}")


class KubePolicySource:
    """Policies and DeviceAttributes in the driver namespace, and this node's identity and labels."""

    def __init__(self, api: client.ApiClient, namespace: str, node_name: str) -> None:
        self._api = api
        self._objs = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._ns = namespace
        self.node_name = node_name

    def _list(self, plural: str, what: str) -> list[dict[str, Any]]:
        path = f"/apis/{POLICY_GROUP}/{POLICY_VERSION}/namespaces/{quote(self._ns)}/{plural}"
        return _items(_required(_request(self._api, "GET", path, what), "GET", what))

    def policies(self) -> list[dict[str, Any]]:
        return self._list("sriovresourcepolicies", f"SriovResourcePolicies in {self._ns}")

    def device_attributes(self) -> list[dict[str, Any]]:
        return self._list("deviceattributes", f"DeviceAttributes in {self._ns}")

    def node(self) -> tuple[str, dict[str, str]]:
        what = f"Node {self.node_name}"
        node = _required(
            _request(self._api, "GET", f"/api/v1/nodes/{quote(self.node_name)}", what), "GET", what
        )
        md = node.get("metadata")
        if not isinstance(md, dict) or not md.get("uid"):
            raise ReasonedError(reasons.NODE_UNREADABLE, f"Node {self.node_name} came back without metadata")
        return str(md["uid"]), {str(k): str(v) for k, v in (md.get("labels") or {}).items()}

    def watch_sources(self, slices: KubeSlices) -> list[tuple[str, Callable[..., Any], dict[str, Any]]]:
        """(description, list function, kwargs) for everything that should trigger a reconcile."""
        return [
            (
                "SriovResourcePolicies",
                self._objs.list_namespaced_custom_object,
                {
                    "group": POLICY_GROUP,
                    "version": POLICY_VERSION,
                    "namespace": self._ns,
                    "plural": "sriovresourcepolicies",
                },
            ),
            (
                "DeviceAttributes",
                self._objs.list_namespaced_custom_object,
                {
                    "group": POLICY_GROUP,
                    "version": POLICY_VERSION,
                    "namespace": self._ns,
                    "plural": "deviceattributes",
                },
            ),
            ("Node", self._core.list_node, {"field_selector": f"metadata.name={self.node_name}"}),
            (
                "ResourceSlices",
                self._objs.list_cluster_custom_object,
                {
                    "group": "resource.k8s.io",
                    "version": "v1",
                    "plural": "resourceslices",
                    "field_selector": slices.selector,
                },
            ),
        ]


def watch_forever(
    what: str,
    list_fn: Callable[..., Any],
    kwargs: Mapping[str, Any],
    on_event: Callable[[], None],
    stop: threading.Event,
) -> None:
    """Call on_event for every change of the watched objects until stop is set; re-lists on errors."""
    while not stop.is_set():
        w = watch.Watch()  # type: ignore[no-untyped-call]
        try:
            for _event in w.stream(list_fn, timeout_seconds=30, **kwargs):  # type: ignore[no-untyped-call]
                on_event()
                if stop.is_set():
                    break
        except Exception as exc:  # the API server restarting or a 410 Gone: re-list and carry on
            log.warning("watch of %s failed (%s); re-listing", what, exc)
            on_event()
            stop.wait(1.0)
        finally:
            w.stop()  # type: ignore[no-untyped-call]
