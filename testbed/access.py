"""Give an identity exactly the RBAC rules a test names, and apply manifests server-side.

``grant`` returns only once the apiserver's authorizer answers "allowed" for the granted rules
(asked through SubjectAccessReview), so the first request a test makes afterwards is not racing
the RBAC informer.
"""

from __future__ import annotations

import hashlib
import json
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException

from testbed.waiting import wait_for

FIELD_MANAGER = "auto-sriov-testbed"
# Building a DynamicClient runs API discovery (dozens of requests): once per ApiClient is enough.
_dynamic_clients: weakref.WeakKeyDictionary[client.ApiClient, dynamic.DynamicClient] = (
    weakref.WeakKeyDictionary()
)


def grant_name(user: str, rules: Sequence[Mapping[str, Any]], namespace: str | None) -> str:
    digest = hashlib.sha256(json.dumps([namespace, list(rules)], sort_keys=True).encode()).hexdigest()[:10]
    return f"testbed-{re.sub(r'[^a-z0-9.-]', '-', user.lower())}-{digest}"


def probe_attributes(rule: Mapping[str, Any], namespace: str | None) -> dict[str, Any] | None:
    """The SubjectAccessReview attributes one rule must allow (its first verb and resource)."""
    if rule.get("nonResourceURLs"):
        return {"nonResourceAttributes": {"path": rule["nonResourceURLs"][0], "verb": rule["verbs"][0]}}
    if not rule.get("resources"):
        return None
    attrs: dict[str, Any] = {
        "verb": rule["verbs"][0],
        "group": (rule.get("apiGroups") or [""])[0],
        "resource": rule["resources"][0].split("/")[0],
    }
    if "/" in rule["resources"][0]:
        attrs["subresource"] = rule["resources"][0].split("/", 1)[1]
    if rule.get("resourceNames"):
        attrs["name"] = rule["resourceNames"][0]
    if namespace:
        attrs["namespace"] = namespace
    return {"resourceAttributes": attrs}


def grant(
    api: client.ApiClient,
    user: str,
    rules: Sequence[Mapping[str, Any]],
    *,
    namespace: str | None = None,
    timeout: float = 30.0,
) -> str:
    """Bind ``user`` to a (Cluster)Role with ``rules``; returns the role/binding name."""
    name = grant_name(user, rules, namespace)
    role = {"metadata": {"name": name}, "rules": [dict(r) for r in rules]}
    kind = "Role" if namespace else "ClusterRole"
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    apply_objects(
        api,
        [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, **_in_ns(role, namespace)},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": f"{kind}Binding",
                **_in_ns(binding, namespace),
            },
        ],
    )
    auth = client.AuthorizationV1Api(api)
    for rule in rules:
        attrs = probe_attributes(rule, namespace)
        if attrs is None:
            continue
        review = client.V1SubjectAccessReview.model_validate({"spec": {"user": user, **attrs}})

        def allowed(review: client.V1SubjectAccessReview = review) -> bool:
            status = auth.create_subject_access_review(review).status
            return status is not None and status.allowed

        wait_for(allowed, timeout, what=f"RBAC to allow {user} {attrs}")
    return name


def _in_ns(obj: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    if namespace:
        return {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    return obj


def _dynamic(api: client.ApiClient) -> dynamic.DynamicClient:
    dyn = _dynamic_clients.get(api)
    if dyn is None:
        dyn = _dynamic_clients[api] = dynamic.DynamicClient(api)
    return dyn


def _resource(dyn: dynamic.DynamicClient, obj: Mapping[str, Any]) -> Any:
    return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])


def object_exists(api: client.ApiClient, obj: Mapping[str, Any]) -> bool:
    """Whether the object a manifest names (kind, name, namespace) exists on the server."""
    dyn, meta = _dynamic(api), obj["metadata"]
    try:
        _resource(dyn, obj).get(name=meta["name"], namespace=meta.get("namespace"))
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def delete_objects(api: client.ApiClient, objects: Iterable[Mapping[str, Any]]) -> None:
    """Delete each object a manifest names; one already gone is fine."""
    dyn = _dynamic(api)
    for obj in objects:
        meta = obj["metadata"]
        try:
            _resource(dyn, obj).delete(name=meta["name"], namespace=meta.get("namespace"))
        except ApiException as exc:
            if exc.status != 404:
                raise


def apply_objects(api: client.ApiClient, objects: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Server-side apply each object (create or update, conflicts forced to our field manager)."""
    dyn = _dynamic(api)
    applied = []
    for obj in objects:
        resource = _resource(dyn, obj)
        meta = obj["metadata"]
        applied.append(
            dyn.server_side_apply(
                resource,
                body=dict(obj),
                name=meta["name"],
                namespace=meta.get("namespace"),
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )
        )
    return applied
