"""List+watch threads that only wake a controller; decisions always re-read live.

Each source calls `on_event(event_type, obj)` for every event, and once with ("RELIST", {}) after a
watch broke (anything may have changed meanwhile). A filter in the controller decides whether the
event is worth a pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client, watch

from sriov_operator.core.keys import (
    DEVICE_ATTRIBUTES,
    DEVICE_CLASS_GROUP,
    DEVICE_CLASS_VERSION,
    DEVICE_CLASSES,
    DRIVER_GROUP,
    DRIVER_VERSION,
    GENERATED_BY_LABEL,
    GENERATED_BY_VALUE,
    GROUP,
    NAD_GROUP,
    NADS,
    NETWORKS,
    NODE_STATES,
    OPERATOR_CONFIGS,
    POLICIES,
    RESOURCE_POLICIES,
    VERSION,
)

log = logging.getLogger(__name__)
OnEvent = Callable[[str, Mapping[str, Any]], None]
WATCH_TIMEOUT_S = 300


@dataclass(frozen=True)
class Source:
    kind: str
    list_fn: Callable[..., Any]
    kwargs: Mapping[str, Any]


def sources(api: client.ApiClient, operator_namespace: str, policy_namespace: str) -> dict[str, Source]:
    objs = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    generated = {"label_selector": f"{GENERATED_BY_LABEL}={GENERATED_BY_VALUE}"}
    ns_custom = objs.list_namespaced_custom_object
    return {
        "SriovNetworkNodePolicy": Source(
            "SriovNetworkNodePolicy",
            ns_custom,
            {"group": GROUP, "version": VERSION, "namespace": operator_namespace, "plural": POLICIES},
        ),
        "SriovNetwork": Source(
            "SriovNetwork",
            objs.list_cluster_custom_object,
            {"group": GROUP, "version": VERSION, "plural": NETWORKS},
        ),
        "NetworkAttachmentDefinition": Source(
            "NetworkAttachmentDefinition",
            objs.list_cluster_custom_object,
            {"group": NAD_GROUP, "version": "v1", "plural": NADS},
        ),
        "SriovNetworkNodeState": Source(
            "SriovNetworkNodeState",
            ns_custom,
            {"group": GROUP, "version": VERSION, "namespace": operator_namespace, "plural": NODE_STATES},
        ),
        "SriovOperatorConfig": Source(
            "SriovOperatorConfig",
            ns_custom,
            {"group": GROUP, "version": VERSION, "namespace": operator_namespace, "plural": OPERATOR_CONFIGS},
        ),
        "DeviceAttributes": Source(
            "DeviceAttributes",
            ns_custom,
            {
                "group": DRIVER_GROUP,
                "version": DRIVER_VERSION,
                "namespace": policy_namespace,
                "plural": DEVICE_ATTRIBUTES,
                **generated,
            },
        ),
        "SriovResourcePolicy": Source(
            "SriovResourcePolicy",
            ns_custom,
            {
                "group": DRIVER_GROUP,
                "version": DRIVER_VERSION,
                "namespace": policy_namespace,
                "plural": RESOURCE_POLICIES,
                **generated,
            },
        ),
        "DeviceClass": Source(
            "DeviceClass",
            objs.list_cluster_custom_object,
            {
                "group": DEVICE_CLASS_GROUP,
                "version": DEVICE_CLASS_VERSION,
                "plural": DEVICE_CLASSES,
                **generated,
            },
        ),
        "Node": Source("Node", core.list_node, {}),
        "Namespace": Source("Namespace", core.list_namespace, {}),
    }


def _as_json(api: client.ApiClient, obj: Any) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        return obj
    out = api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return out if isinstance(out, Mapping) else {}


def watch_forever(api: client.ApiClient, source: Source, on_event: OnEvent, stop: threading.Event) -> None:
    """Stream `source` until `stop`; after a failure, report RELIST and start again."""
    while not stop.is_set():
        w = watch.Watch()  # type: ignore[no-untyped-call]
        try:
            stream = w.stream(source.list_fn, timeout_seconds=WATCH_TIMEOUT_S, **source.kwargs)  # type: ignore[no-untyped-call]
            for event in stream:
                on_event(str(event.get("type")), _as_json(api, event.get("object")))
                if stop.is_set():
                    break
        except Exception as exc:  # the API server restarting, a 410 Gone, a dropped connection
            log.warning("watch of %s failed (%s); re-listing", source.kind, exc)
            on_event("RELIST", {})
            stop.wait(1.0)
        finally:
            w.stop()  # type: ignore[no-untyped-call]


def start(
    api: client.ApiClient,
    wanted: Mapping[str, Source],
    route: Callable[[str], OnEvent],
    stop: threading.Event,
) -> list[threading.Thread]:
    threads = []
    for kind, source in wanted.items():
        t = threading.Thread(
            target=watch_forever, args=(api, source, route(kind), stop), name=f"watch-{kind}", daemon=True
        )
        t.start()
        threads.append(t)
    return threads
