"""The API paths and the per-request timeout both of the shim's API clients use (standard library only)."""

from __future__ import annotations

import urllib.parse

# Each API request is bounded well inside a CNI ADD's budget, so a hung server costs one retry
# window, not the runtime's whole deadline.
REQUEST_TIMEOUT = 5.0
NAD_GROUP_PATH = "/apis/k8s.cni.cncf.io/v1"
NADS_PATH = f"{NAD_GROUP_PATH}/network-attachment-definitions"


def q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{q(namespace)}/pods/{q(name)}"


def pod_status_path(namespace: str, name: str) -> str:
    return f"{pod_path(namespace, name)}/status"


def nad_path(namespace: str, name: str) -> str:
    return f"{NAD_GROUP_PATH}/namespaces/{q(namespace)}/network-attachment-definitions/{q(name)}"


def events_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{q(namespace)}/events"
