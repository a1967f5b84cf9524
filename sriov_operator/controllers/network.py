"""The network controller: every SriovNetwork becomes its source NAD and a Ready condition.

The NAD is the one sriov_operator.core.sourcenad describes, which the node-policy controller
checks NADs against too, so the two cannot drift. NADs carrying our owner marker that no
SriovNetwork stands for any more are deleted (UID precondition), which covers CR deletion and networkNamespace moves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sriov_operator.controllers.transitions import report
from sriov_operator.core.keys import NETWORKS, READY
from sriov_operator.core.network import obsolete_nads, plan_network
from sriov_operator.core.sourcenad import target_of
from sriov_operator.ports import NetworkCluster
from sriov_operator.reasons import NAD_INVALID, NAD_NOT_FOUND, OperatorError

log = logging.getLogger(__name__)


class NetworkController:
    def __init__(self, cluster: NetworkCluster, *, operator_namespace: str, prefix: str) -> None:
        self._cluster = cluster
        self._ns = operator_namespace
        self._prefix = prefix
        self.writes = 0

    def reconcile(self) -> bool:
        self.writes = 0
        ok = self._reconcile()
        log.info("network pass done: %d write(s)", self.writes)
        return ok

    def _reconcile(self) -> bool:
        ok = True
        networks = [
            n for n in self._cluster.list_networks() if not (n.get("metadata") or {}).get("deletionTimestamp")
        ]
        for network in networks:
            ok = self._one(network) and ok
        try:
            for nad in obsolete_nads(self._cluster.list_nads(), networks):
                md = nad.get("metadata") or {}
                log.info(
                    "deleting NetworkAttachmentDefinition %s/%s: no SriovNetwork renders it",
                    md.get("namespace"),
                    md.get("name"),
                )
                self._cluster.delete_nad(
                    str(md.get("namespace")), str(md.get("name")), str(md.get("uid", ""))
                )
        except OperatorError as exc:
            log.warning("%s", exc)
            ok = False
        return ok

    def _one(self, network: Mapping[str, Any]) -> bool:
        namespace, name = target_of(network)
        try:
            existing = self._cluster.get_nad(namespace, name)
            exists = existing is not None or self._cluster.namespace_exists(namespace)
        except OperatorError as exc:
            self._report(
                network,
                "False",
                NAD_NOT_FOUND,
                f"reading NetworkAttachmentDefinition {namespace}/{name}: {exc.message}",
            )
            return False
        decision = plan_network(
            network, existing, namespace_exists=exists, operator_namespace=self._ns, prefix=self._prefix
        )
        ok = True
        status, reason, message = decision.status, decision.reason, decision.message
        try:
            if decision.write != "none":
                self.writes += 1
            if decision.write == "create":
                self._cluster.create_nad(decision.body)
            elif decision.write == "update":
                self._cluster.replace_nad(decision.body)
        except OperatorError as exc:
            status, reason, message = (
                "False",
                NAD_INVALID,
                f"writing NetworkAttachmentDefinition {namespace}/{name}: {exc.message}",
            )
            ok = False
        return self._report(network, status, reason, message) and ok

    def _report(self, network: Mapping[str, Any], status: str, reason: str, message: str) -> bool:
        return report(
            self._cluster,
            NETWORKS,
            "SriovNetwork",
            network,
            condition_type=READY,
            verdict=(status, reason, message),
        )
