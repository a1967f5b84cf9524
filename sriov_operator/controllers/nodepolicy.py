"""The node-policy DRA controller: policies to per-policy DeviceAttributes and per-node
SriovResourcePolicy objects, and DRAConfigurationReady on every policy with a dra block.

One pass = one live snapshot, one plan (sriov_operator.core.plan), its writes in order, then the
conditions. A failed write does not stop the pass (healthy policies still reconcile); it keeps
the policies that depend on it False and makes the worker retry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from sriov_contract.keys import MANAGED_BY_LABEL
from sriov_operator.controllers.transitions import report
from sriov_operator.core.attributes import NetworkRef
from sriov_operator.core.deviceclasses import add_device_classes
from sriov_operator.core.keys import DRA_READY, OWNER_REF_ANNOTATION, POLICIES
from sriov_operator.core.plan import Plan, Snapshot, Write, build_plan, condition_of
from sriov_operator.core.resolve import SourceNad, resolve
from sriov_operator.core.sourcenad import target_of
from sriov_operator.ports import PolicyCluster
from sriov_operator.reasons import (
    DRA_CONFIGURATION_SYNC_FAILED,
    SOURCE_ACCESS_DENIED,
    ApiError,
    OperatorError,
    fail,
)

log = logging.getLogger(__name__)


class _Reader:
    """Live source reads for one pass; records every SriovNetwork and NAD it looked at."""

    def __init__(self, cluster: PolicyCluster) -> None:
        self._cluster = cluster
        self.networks: set[tuple[str, str]] = set()
        self.nads: set[tuple[str, str]] = set()

    def _read(self, what: str, fn: Any, namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            found: Mapping[str, Any] | None = fn(namespace, name)
        except ApiError as exc:
            if exc.status == 403:
                raise fail(
                    SOURCE_ACCESS_DENIED,
                    f"the operator may not read {what} {namespace}/{name}: {exc.message}",
                ) from None
            raise fail(DRA_CONFIGURATION_SYNC_FAILED, exc.message) from None
        return found

    def get_network(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.networks.add((namespace, name))
        found = self._read("SriovNetwork", self._cluster.get_network, namespace, name)
        if found is not None:
            self.nads.add(target_of(found))
        return found

    def get_nad(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.nads.add((namespace, name))
        return self._read("NetworkAttachmentDefinition", self._cluster.get_nad, namespace, name)


class NadFilter:
    """Which NAD events wake the node-policy controller (spec 12.2.6): a referenced source, or an
    object whose old or new version carries an operator owner marker. The driver's Pod shadows
    (managed-by label) never do: they come and go with every Pod and must not rebuild anything."""

    def __init__(self) -> None:
        self.referenced: set[tuple[str, str]] = set()
        self._marked: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def wants(self, event_type: str, nad: Mapping[str, Any]) -> bool:
        if event_type == "RELIST":
            return True
        md = nad.get("metadata") or {}
        if (md.get("labels") or {}).get(MANAGED_BY_LABEL):
            return False
        key = (str(md.get("namespace")), str(md.get("name")))
        marked = bool((md.get("annotations") or {}).get(OWNER_REF_ANNOTATION))
        with self._lock:
            was_marked = key in self._marked
            if marked and event_type != "DELETED":
                self._marked.add(key)
            else:
                self._marked.discard(key)
            return key in self.referenced or marked or was_marked


class NodePolicyController:
    def __init__(
        self, cluster: PolicyCluster, *, operator_namespace: str, policy_namespace: str, prefix: str
    ) -> None:
        self._cluster = cluster
        self._ns = operator_namespace
        self._policy_ns = policy_namespace
        self._prefix = prefix
        self.nad_filter = NadFilter()
        self.last_plan: Plan | None = None

    def snapshot(self) -> Snapshot:
        c = self._cluster
        return Snapshot(
            operator_namespace=self._ns,
            policy_namespace=self._policy_ns,
            prefix=self._prefix,
            config=c.get_config(self._ns),
            policies=c.list_policies(self._ns),
            nodes=c.list_nodes(),
            node_states=c.list_node_states(self._ns),
            attributes=c.list_generated("DeviceAttributes", self._policy_ns),
            resource_policies=c.list_generated("SriovResourcePolicy", self._policy_ns),
            device_classes=c.list_generated("DeviceClass", self._policy_ns),
        )

    def reconcile(self) -> bool:
        snap = self.snapshot()
        reader = _Reader(self._cluster)

        def resolver(ref: NetworkRef) -> SourceNad:
            return resolve(ref, reader, operator_namespace=self._ns)

        plan = build_plan(snap, resolver)
        add_device_classes(plan, snap)
        self.nad_filter.referenced = set(reader.nads)
        for warning in plan.warnings:
            log.warning("%s", warning)
        failed: dict[Write, str] = {}
        for write in plan.writes:
            try:
                self._apply(write)
            except OperatorError as exc:
                log.warning("%s: %s", write, exc.message)
                failed[write] = exc.message
        self.last_plan = plan
        ok = not failed
        for uid, policy in plan.policies.items():
            status, reason, message = condition_of(plan, uid, failed)
            ok = self._report(policy, status, reason, message) and ok
        log.info("node-policy pass done: %d write(s), %d failed", len(plan.writes), len(failed))
        # Retry while a source read failed for transport reasons (not a real verdict).
        transient = any(
            p.reason == DRA_CONFIGURATION_SYNC_FAILED for ps in plan.problems.values() for p in ps
        )
        return ok and not transient

    def _apply(self, write: Write) -> None:
        c, ns = self._cluster, self._policy_ns
        if write.verb == "create":
            c.create(write.kind, ns, write.body or {})
        elif write.verb == "update":
            c.replace(write.kind, ns, write.body or {})
        else:
            c.delete(write.kind, ns, write.name, write.uid)

    def _report(self, policy: Mapping[str, Any], status: str, reason: str, message: str) -> bool:
        return report(
            self._cluster,
            POLICIES,
            "SriovNetworkNodePolicy",
            policy,
            condition_type=DRA_READY,
            verdict=(status, reason, message),
        )
