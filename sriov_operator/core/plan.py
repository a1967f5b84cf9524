"""The node-policy controller's desired state and the writes that reach it (spec 12.2.4-12.2.6).

One pass: validate every dra block, resolve every reference once, build the per-policy
DeviceAttributes, translate every selecting policy on every node, withdraw nodes whose configs
cannot be isolated, and diff all of it against the existing objects. The result is ordered
writes (publish, invalidate, per-node configs, cleanup), each naming the policies whose readiness
depends on it, and every problem found per policy. `condition_of` then turns a policy's problems
plus the writes that failed into its DRAConfigurationReady condition.

Only our objects are ever changed, adopted or deleted (sriov_operator.core.ownership); the policies
that need an object of a desired name that is not ours report DRAConfigurationSyncFailed naming it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sriov_contract.errors import ContractError
from sriov_contract.keys import label_value
from sriov_operator.core.attributes import DraBlock, NetworkRef, validate_dra
from sriov_operator.core.keys import (
    DEFAULT_POLICY_NAME,
    DRA_FEATURE_GATE,
    DRIVER_GROUP,
    DRIVER_VERSION,
    GENERATED_BY_LABEL,
    GENERATED_BY_VALUE,
    HOSTNAME_LABEL,
    NAD_NAME_ATTRIBUTE,
    NAD_NAMESPACE_ATTRIBUTE,
    NODE_LABEL,
    NODE_POLICY_UID_LABEL,
    OPERATOR_CONFIG_NAME,
    RESOURCE_NAME_ATTRIBUTE,
    RESOURCE_POOL_LABEL,
    policy_attributes_name,
    pool_attributes_name,
    pool_of,
)
from sriov_operator.core.ownership import differs, is_ours, owner_reference, update_body
from sriov_operator.core.resolve import SourceNad
from sriov_operator.core.translate import inventory, translate, vf_set
from sriov_operator.reasons import (
    CONFLICTING_DRA_MAPPING,
    DRA_CONFIGURATION_APPLIED,
    DRA_CONFIGURATION_SYNC_FAILED,
    DRA_INACTIVE,
    DRA_REASON_PRECEDENCE,
    OperatorError,
)

Kind = Literal["DeviceAttributes", "SriovResourcePolicy", "DeviceClass"]
Resolver = Callable[[NetworkRef], SourceNad]


@dataclass(frozen=True)
class Snapshot:
    """Everything one pass decides from, read live by the controller."""

    operator_namespace: str
    policy_namespace: str
    prefix: str
    config: Mapping[str, Any] | None
    policies: Sequence[Mapping[str, Any]]
    nodes: Sequence[Mapping[str, Any]]
    node_states: Mapping[str, Mapping[str, Any]]
    # Every DeviceAttributes / SriovResourcePolicy in the policy namespace, by name (not only
    # labelled ones: an unlabelled object of a desired name must be seen to be left alone).
    attributes: Mapping[str, Mapping[str, Any]]
    resource_policies: Mapping[str, Mapping[str, Any]]
    # Every DeviceClass of the cluster, by name (sriov_operator.core.deviceclasses).
    device_classes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)  # identity: the controller maps each failed write to its error
class Write:
    verb: Literal["create", "update", "delete"]
    kind: Kind
    name: str
    body: Mapping[str, Any] | None = None
    uid: str = ""  # delete precondition
    policies: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return f"{self.verb} {self.kind} {self.name}"


@dataclass(frozen=True)
class Problem:
    reason: str
    message: str


@dataclass
class Plan:
    active: bool
    writes: list[Write] = field(default_factory=list)
    # Per dra policy (by UID): the policy object, its problems, the nodes carrying its config.
    policies: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    problems: dict[str, list[Problem]] = field(default_factory=dict)
    nodes: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, uid: str, reason: str, message: str) -> None:
        found = self.problems.setdefault(uid, [])
        if Problem(reason, message) not in found:
            found.append(Problem(reason, message))


@dataclass(frozen=True)
class _Entry:
    """One non-default policy as this pass sees it."""

    policy: Mapping[str, Any]
    uid: str
    where: str
    dra: DraBlock | None  # None: legacy, or a dra block that failed validation (see managed)
    managed: bool  # a non-nil spec.dra
    attributes: dict[str, Any] | None  # the desired map, None when unresolved

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.policy.get("spec") or {}


def _md(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def provider_active(config: Mapping[str, Any] | None) -> bool:
    gates = ((config or {}).get("spec") or {}).get("featureGates") or {}
    return gates.get(DRA_FEATURE_GATE) is True


def _policy_order(policy: Mapping[str, Any]) -> tuple[int, str]:
    # Lower priority number first (upstream sorts the other way, so its lowest-priority config
    # would win the driver's first match); name breaks ties.
    spec = policy.get("spec") or {}
    priority = spec.get("priority")
    return (priority if isinstance(priority, int) else 99, str(_md(policy).get("name", "")))


def selects_node(spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Upstream's nodeSelector: every key must equal the node's label."""
    return all(labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items())


def _resource_name_value(spec: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    name = str(spec.get("resourceName") or "")
    return {"string": f"{prefix}/{name}" if prefix else name}


def _entries(snap: Snapshot, plan: Plan, resolver: Resolver) -> list[_Entry]:
    out = []
    for policy in sorted(snap.policies, key=_policy_order):
        md = _md(policy)
        uid, name = str(md.get("uid", "")), str(md.get("name", ""))
        where = f"SriovNetworkNodePolicy {md.get('namespace')}/{name}"
        spec = policy.get("spec") or {}
        dra = spec.get("dra")
        if dra is None:
            if name != DEFAULT_POLICY_NAME:  # the bootstrap policy takes no part, as upstream
                out.append(_Entry(policy, uid, where, None, False, None))
            continue
        plan.policies[uid] = policy
        try:
            block = validate_dra(where, dra, is_default_policy=name == DEFAULT_POLICY_NAME)
        except OperatorError as exc:
            plan.add(uid, exc.reason, exc.message)
            if name != DEFAULT_POLICY_NAME:
                out.append(_Entry(policy, uid, where, None, True, None))
            continue
        if not plan.active:
            plan.add(
                uid,
                DRA_INACTIVE,
                f"{where}: the DRA provider is disabled; the dra block is stored and applied once "
                f"SriovOperatorConfig {snap.operator_namespace}/{OPERATOR_CONFIG_NAME} sets "
                f"spec.featureGates.{DRA_FEATURE_GATE}: true",
            )
            continue
        attrs: dict[str, Any] | None = {RESOURCE_NAME_ATTRIBUTE: _resource_name_value(spec, snap.prefix)}
        attrs.update(copy.deepcopy(dict(block.attributes)))  # type: ignore[union-attr]
        if block.reference is not None:
            try:
                nad = resolver(block.reference)
            except OperatorError as exc:
                plan.add(uid, exc.reason, f"{where}: {exc.message}")
                attrs = None
            else:
                attrs[NAD_NAME_ATTRIBUTE] = {"string": nad.name}  # type: ignore[index]
                attrs[NAD_NAMESPACE_ATTRIBUTE] = {"string": nad.namespace}  # type: ignore[index]
        out.append(_Entry(policy, uid, where, block, True, attrs))
    return out


def _labels_of(entry: _Entry) -> dict[str, str]:
    """The labels of a per-policy object, which its config's selector matches exactly."""
    return {GENERATED_BY_LABEL: GENERATED_BY_VALUE, NODE_POLICY_UID_LABEL: entry.uid}


def _selector_of(entry: _Entry) -> dict[str, Any]:
    if entry.managed:
        return {"matchLabels": _labels_of(entry)}
    # Upstream's legacy pool selector: independently owned objects with the pool label still merge.
    return {"matchLabels": {RESOURCE_POOL_LABEL: pool_of(str(entry.spec.get("resourceName")))}}


def _object(
    kind: Kind, name: str, namespace: str, labels: Mapping[str, str], spec: Any, *, config: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": f"{DRIVER_GROUP}/{DRIVER_VERSION}",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [owner_reference(config)],
        },
        "spec": spec,
    }


def _node_problems(
    node: str, selected: Sequence[_Entry], pfs: Any, plan: Plan
) -> tuple[list[dict[str, Any]], bool]:
    """The configs of one node, and whether the node had to be withdrawn."""
    configs: list[dict[str, Any]] = []
    offenders: dict[str, Problem] = {}
    sets: list[tuple[_Entry, frozenset[str]]] = []
    for entry in selected:
        try:
            flt = translate(f"{entry.where} on node {node}", entry.spec, pfs)
        except OperatorError as exc:
            if entry.managed:
                offenders[entry.uid] = Problem(exc.reason, exc.message)
            else:
                # A legacy selector the driver cannot express gets no config rather than a
                # broader one; its devices stay unadvertised.
                plan.warnings.append(exc.message)
            continue
        configs.append({"deviceAttributesSelector": _selector_of(entry), "resourceFilters": [flt]})
        sets.append((entry, vf_set(entry.spec, pfs)))
    for i, (a, vfs_a) in enumerate(sets):
        for b, vfs_b in sets[i + 1 :]:
            if not (a.managed or b.managed) or not vfs_a & vfs_b:
                continue
            # An unresolved policy's map differs from every other map (it has none to share).
            if a.attributes is not None and a.attributes == b.attributes:
                continue
            shared = len(vfs_a & vfs_b)
            for x, y in ((a, b), (b, a)):
                offenders.setdefault(
                    x.uid,
                    Problem(
                        CONFLICTING_DRA_MAPPING,
                        f"{x.where} and {y.where} select {shared} common VF(s) on node {node} with "
                        "different attribute maps; make their nicSelectors disjoint",
                    ),
                )
    if not offenders:
        return configs, False
    names = ", ".join(sorted(str(_md(e.policy).get("name")) for e in selected if e.uid in offenders))
    worst = min((p.reason for p in offenders.values()), key=DRA_REASON_PRECEDENCE.index)
    for entry in selected:
        if not entry.managed:
            continue
        problem = offenders.get(entry.uid) or Problem(
            worst,
            f"{entry.where}: node {node}'s configs are withdrawn (no devices advertised) because of "
            f"policies {names}; fix those",
        )
        plan.add(entry.uid, problem.reason, problem.message)
    return [], True


def _sync(
    plan: Plan,
    snap: Snapshot,
    kind: Kind,
    desired: Mapping[str, Any],
    dependents: frozenset[str],
) -> None:
    name = desired["metadata"]["name"]
    existing = (snap.attributes if kind == "DeviceAttributes" else snap.resource_policies).get(name)
    if existing is None:
        plan.writes.append(Write("create", kind, name, desired, policies=dependents))
    elif not is_ours(existing, snap.config):
        for uid in sorted(dependents):
            plan.add(
                uid,
                DRA_CONFIGURATION_SYNC_FAILED,
                f"{kind} {snap.policy_namespace}/{name} exists and is not generated by sriov-operator "
                f"(label {GENERATED_BY_LABEL}={GENERATED_BY_VALUE} and SriovOperatorConfig owner); "
                "delete or rename it so the operator can create its own",
            )
    elif differs(existing, desired):
        plan.writes.append(Write("update", kind, name, update_body(existing, desired), policies=dependents))


def delete(plan: Plan, kind: Kind, obj: Mapping[str, Any], dependents: frozenset[str] = frozenset()) -> None:
    md = _md(obj)
    plan.writes.append(
        Write("delete", kind, str(md.get("name")), uid=str(md.get("uid", "")), policies=dependents)
    )


def build_plan(snap: Snapshot, resolver: Resolver) -> Plan:
    plan = Plan(active=provider_active(snap.config))
    entries = _entries(snap, plan, resolver)
    wanted_attrs: set[str] = set()
    wanted_nodes: set[str] = set()
    if plan.active and snap.config is not None:
        wanted_attrs = _publish(plan, snap, entries, snap.config)
        _invalidate(plan, snap, entries, snap.config)
        wanted_nodes = _node_configs(plan, snap, entries, snap.config)
    _cleanup(plan, snap, wanted_attrs, wanted_nodes)
    return plan


def _publish(plan: Plan, snap: Snapshot, entries: Sequence[_Entry], config: Mapping[str, Any]) -> set[str]:
    """(a) Publish: every resolved per-policy object, and the legacy pool objects still in use; the
    DeviceAttributes names wanted."""
    wanted: set[str] = set()
    for entry in entries:
        if entry.managed and entry.attributes is not None:
            name = policy_attributes_name(entry.uid)
            wanted.add(name)
            body = _object(
                "DeviceAttributes",
                name,
                snap.policy_namespace,
                _labels_of(entry),
                {"attributes": entry.attributes},
                config=config,
            )
            _sync(plan, snap, "DeviceAttributes", body, frozenset({entry.uid}))
    for resource_name in sorted({str(e.spec.get("resourceName")) for e in entries if not e.managed}):
        name = pool_attributes_name(resource_name)
        if name in wanted:
            continue
        wanted.add(name)
        labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE, RESOURCE_POOL_LABEL: pool_of(resource_name)}
        spec = {
            "attributes": {
                RESOURCE_NAME_ATTRIBUTE: _resource_name_value({"resourceName": resource_name}, snap.prefix)
            }
        }
        _sync(
            plan,
            snap,
            "DeviceAttributes",
            _object("DeviceAttributes", name, snap.policy_namespace, labels, spec, config=config),
            frozenset(),
        )
    return wanted


def _invalidate(plan: Plan, snap: Snapshot, entries: Sequence[_Entry], config: Mapping[str, Any]) -> None:
    """(b) Invalidate: an unresolved policy's stale object goes before any node config is written."""
    for entry in entries:
        name = policy_attributes_name(entry.uid)
        existing = snap.attributes.get(name)
        if entry.managed and entry.attributes is None and existing is not None:
            if is_ours(existing, config):
                delete(plan, "DeviceAttributes", existing, frozenset({entry.uid}))
            else:
                plan.add(
                    entry.uid,
                    DRA_CONFIGURATION_SYNC_FAILED,
                    f"DeviceAttributes {snap.policy_namespace}/{name} exists and is not generated by "
                    "sriov-operator, so its stale attributes cannot be withdrawn; delete it",
                )


def _node_configs(
    plan: Plan, snap: Snapshot, entries: Sequence[_Entry], config: Mapping[str, Any]
) -> set[str]:
    """(c) Per-node configs, keeping unresolved policies' filters and selectors; the nodes wanted."""
    wanted: set[str] = set()
    for node in sorted(snap.nodes, key=lambda n: str(_md(n).get("name"))):
        node_name = str(_md(node).get("name"))
        labels = _md(node).get("labels") or {}
        hostname = labels.get(HOSTNAME_LABEL)
        selected = [e for e in entries if selects_node(e.spec, labels)]
        if not hostname or node_name not in snap.node_states or not selected:
            continue
        wanted.add(node_name)
        configs, _withdrawn = _node_problems(
            node_name, selected, inventory(snap.node_states[node_name]), plan
        )
        dependents = frozenset(e.uid for e in selected if e.managed)
        for uid in dependents:
            plan.nodes.setdefault(uid, []).append(node_name)
        obj_labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE}
        # A node name too long for a label value goes unlabelled: the object name identifies it.
        with contextlib.suppress(ContractError):
            obj_labels[NODE_LABEL] = label_value(node_name)
        node_spec: dict[str, Any] = {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [hostname]}]}
                ]
            },
            "configs": configs,
        }
        body = _object(
            "SriovResourcePolicy", node_name, snap.policy_namespace, obj_labels, node_spec, config=config
        )
        _sync(plan, snap, "SriovResourcePolicy", body, dependents)
    return wanted


def _cleanup(plan: Plan, snap: Snapshot, wanted_attrs: set[str], wanted_nodes: set[str]) -> None:
    """(d) Cleanup by desired-name set; never an object that is not ours."""
    for name, obj in sorted(snap.attributes.items()):
        if name not in wanted_attrs and is_ours(obj, snap.config) and not _already_deleted(plan, name):
            delete(plan, "DeviceAttributes", obj)
    for name, obj in sorted(snap.resource_policies.items()):
        if name not in wanted_nodes and is_ours(obj, snap.config):
            delete(plan, "SriovResourcePolicy", obj)


def _already_deleted(plan: Plan, name: str) -> bool:
    return any(w.verb == "delete" and w.kind == "DeviceAttributes" and w.name == name for w in plan.writes)


def condition_of(plan: Plan, uid: str, failed: Mapping[Write, str]) -> tuple[str, str, str]:
    """(status, reason, message) of DRAConfigurationReady for one dra policy, once the writes ran.

    `failed` maps each write that did not succeed to its error message. True only when no problem
    was found and every write the policy depends on succeeded.
    """
    problems = list(plan.problems.get(uid, []))
    for write, why in failed.items():
        if uid in write.policies:
            problems.append(Problem(DRA_CONFIGURATION_SYNC_FAILED, f"{write} failed: {why}; retrying"))
    if problems:
        reason = min((p.reason for p in problems), key=DRA_REASON_PRECEDENCE.index)
        message = "; ".join(sorted(p.message for p in problems if p.reason == reason))
        return "False", reason, message
    policy = plan.policies[uid]
    nodes = sorted(plan.nodes.get(uid, []))
    where = f"SriovNetworkNodePolicy {_md(policy).get('namespace')}/{_md(policy).get('name')}"
    on = f"configured on node(s) {', '.join(nodes)}" if nodes else "no node selected yet"
    return (
        "True",
        DRA_CONFIGURATION_APPLIED,
        f"{where}: DeviceAttributes {policy_attributes_name(uid)} applied; {on}",
    )
