"""The API paths and the per-request timeout both of the shim's API clients use (standard library only)."""

from __future__ import annotations

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


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{q(namespace)}/pods/{q(name)}"


def pod_status_path(namespace: str, name: str) -> str:
    return f"{pod_path(namespace, name)}/status"


def nad_path(namespace: str, name: str) -> str:
    return f"{NAD_GROUP_PATH}/namespaces/{q(namespace)}/network-attachment-definitions/{q(name)}"


def events_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{q(namespace)}/events"
