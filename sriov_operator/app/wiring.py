"""Builds one process: a shared API adapter, the two controllers, their workers and watches."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes import config as kube_config

from sriov_operator.controllers.network import NetworkController
from sriov_operator.controllers.nodepolicy import NadFilter, NodePolicyController
from sriov_operator.controllers.nodestate import NodeStateReporter
from sriov_operator.controllers.worker import Worker
from sriov_operator.kube import watches
from sriov_operator.kube.api import OperatorApi
from sriov_operator.node.sysfs import read_pfs
from sriov_operator.reasons import INVALID_CONFIGURATION, OperatorError

log = logging.getLogger(__name__)
CONTROLLERS = ("network", "node-policy")


@dataclass(frozen=True)
class Config:
    namespace: str
    policy_namespace: str
    resource_prefix: str
    controllers: tuple[str, ...]
    resync_seconds: float
    kubeconfig: str | None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.controllers) - set(CONTROLLERS))
        if unknown or not self.controllers:
            raise OperatorError(
                INVALID_CONFIGURATION,
                f"--controllers {','.join(self.controllers)!r}: choose from {', '.join(CONTROLLERS)}",
            )
        if not self.namespace:
            raise OperatorError(
                INVALID_CONFIGURATION, "--namespace (OPERATOR_NAMESPACE) must name the operator namespace"
            )
        if self.resync_seconds <= 0:
            raise OperatorError(INVALID_CONFIGURATION, "--resync-seconds must be positive")


def api_client(kubeconfig: str | None) -> client.ApiClient:
    if kubeconfig:
        api: client.ApiClient = kube_config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        return api
    kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


def _marker_filter() -> Callable[[str, Mapping[str, Any]], bool]:
    nads = NadFilter()  # nothing referenced: owner-marker changes only
    return nads.wants


def run(cfg: Config, stop: threading.Event) -> None:
    api = api_client(cfg.kubeconfig)
    cluster = OperatorApi(api)
    workers: list[Worker] = []
    # kind -> [(worker, event filter)]
    routes: dict[str, list[tuple[Worker, Callable[[str, Mapping[str, Any]], bool]]]] = {}

    def every(_t: str, _o: Mapping[str, Any]) -> bool:
        return True

    def added(event_type: str, _o: Mapping[str, Any]) -> bool:
        return event_type in ("ADDED", "RELIST")

    if "network" in cfg.controllers:
        net = NetworkController(cluster, operator_namespace=cfg.namespace, prefix=cfg.resource_prefix)
        w = Worker("network", net.reconcile, cfg.resync_seconds)
        workers.append(w)
        for kind, flt in (
            ("SriovNetwork", every),
            ("NetworkAttachmentDefinition", _marker_filter()),
            ("Namespace", added),
        ):
            routes.setdefault(kind, []).append((w, flt))
    if "node-policy" in cfg.controllers:
        pol = NodePolicyController(
            cluster,
            operator_namespace=cfg.namespace,
            policy_namespace=cfg.policy_namespace,
            prefix=cfg.resource_prefix,
        )
        w = Worker("node-policy", pol.reconcile, cfg.resync_seconds)
        workers.append(w)
        # SriovNetwork: every event, status-only Ready transitions included (spec 12.2.6).
        for kind in (
            "SriovNetworkNodePolicy",
            "SriovNetwork",
            "SriovNetworkNodeState",
            "SriovOperatorConfig",
            "DeviceAttributes",
            "SriovResourcePolicy",
            "DeviceClass",
            "Node",
        ):
            routes.setdefault(kind, []).append((w, every))
        routes.setdefault("NetworkAttachmentDefinition", []).append((w, pol.nad_filter.wants))
        routes.setdefault("Namespace", []).append((w, added))

    def route(kind: str) -> Callable[[str, Mapping[str, Any]], None]:
        def on_event(event_type: str, obj: Mapping[str, Any]) -> None:
            md = obj.get("metadata") or {}
            for worker, wanted in routes[kind]:
                verdict = wanted(event_type, obj)
                # Logged before the trigger: the pass it wakes must never log ahead of its cause.
                log.debug(
                    "%s %s %s/%s: %s for %s",
                    event_type, kind, md.get("namespace", ""), md.get("name", ""),
                    "enqueued" if verdict else "filtered", worker.name,
                )  # fmt: skip
                if verdict:
                    worker.trigger()

        return on_event

    available = watches.sources(api, cfg.namespace, cfg.policy_namespace)
    watches.start(api, {k: available[k] for k in routes}, route, stop)
    threads = [
        threading.Thread(target=w.run, args=(stop,), name=f"worker-{w.name}", daemon=True) for w in workers
    ]
    for t in threads:
        t.start()
    log.info(
        "sriov-operator running: controllers %s, operator namespace %s, policy namespace %s",
        ",".join(cfg.controllers),
        cfg.namespace,
        cfg.policy_namespace,
    )
    stop.wait()
    for t in threads:
        t.join(timeout=5)
    api.close()  # type: ignore[no-untyped-call]


def run_node_state(
    cfg: Config, node_name: str, sysfs_root: Path, interval_s: float, *, once: bool, stop: threading.Event
) -> bool:
    """Report this node's inventory: one pass (`once`, returns whether it succeeded) or a poll
    every `interval_s` until `stop`."""
    api = api_client(cfg.kubeconfig)
    reporter = NodeStateReporter(
        OperatorApi(api),
        namespace=cfg.namespace,
        node_name=node_name,
        read_inventory=lambda: read_pfs(sysfs_root),
    )
    try:
        if once:
            return reporter.reconcile()
        log.info("sriov-operator node-state running for node %s (sysfs %s)", node_name, sysfs_root)
        Worker("node-state", reporter.reconcile, interval_s).run(stop)
        return True
    finally:
        api.close()  # type: ignore[no-untyped-call]
