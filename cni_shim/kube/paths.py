"""The API paths, list answers and the per-request timeout both of the shim's API clients use (no third-party import)."""

from __future__ import annotations

from cni_shim.errors import ApiError

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

# Each API request is bounded well inside a CNI ADD's budget, so a hung server costs one retry
# window, not the runtime's whole deadline.
REQUEST_TIMEOUT = 5.0
NAD_GROUP_PATH = "/apis/k8s.cni.cncf.io/v1"
NADS_PATH = f"{NAD_GROUP_PATH}/network-attachment-definitions"


_UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~"
_UNRESERVED_BYTES = frozenset(_UNRESERVED.encode())


def q(segment: str) -> str:
    """urllib.parse.quote(segment, safe=""), spelled out: that module (with the `ipaddress` it
    imports) costs a thin ADD more than all its quoting. Kubernetes names need no quoting at all."""
    if not segment.strip(_UNRESERVED):
        return segment
    return "".join(chr(b) if b in _UNRESERVED_BYTES else f"%{b:02X}" for b in segment.encode())


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{q(name)}"


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{q(namespace)}/pods/{q(name)}"


def pod_status_path(namespace: str, name: str) -> str:
    return f"{pod_path(namespace, name)}/status"


def nad_path(namespace: str, name: str) -> str:
    return f"{NAD_GROUP_PATH}/namespaces/{q(namespace)}/network-attachment-definitions/{q(name)}"


def nads_path(namespace: str, label_selector: str) -> str:
    """A list of one namespace's NADs that carry the selected labels."""
    return f"{NAD_GROUP_PATH}/namespaces/{q(namespace)}/network-attachment-definitions?labelSelector={q(label_selector)}"


def list_items(doc: dict[str, Any] | None, what: str) -> list[dict[str, Any]]:
    """A list answer's items; a missing collection (404) lists nothing."""
    if doc is None:
        return []
    items = doc.get("items")
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ApiError(f"LIST {what} returned no list of objects", 0)
    return items


def events_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{q(namespace)}/events"
