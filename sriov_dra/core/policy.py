"""Which discovered VFs to advertise, and with which extra attributes (SriovResourcePolicy).

Pure: policies, DeviceAttributes objects and node labels in; eligible and blocked devices out.
Advertisement is opt-in. Policies that select this node are taken in name order and their
configs in list order; the first config whose filters match a device claims it. A claimed
device whose config cannot be resolved (conflicting NAD references, malformed attributes, an
unimplemented filter in managed mode) is blocked: it is withheld, never handed to a later config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sriov_dra import reasons
from sriov_dra.core.errors import DriverCoreError
from sriov_dra.core.policyref import DeviceAttributesObject, merge_device_attributes
from sriov_dra.model import (
    ATTR_DEVICE_ID,
    ATTR_LINK_TYPE,
    ATTR_PCI_ADDRESS,
    ATTR_PF_NAME,
    ATTR_PF_PCI_ADDRESS,
    ATTR_VENDOR,
    RESERVED_ATTRIBUTES,
    TypedAttribute,
    VirtualFunction,
)

_FILTER_KEYS = {
    "vendors": ATTR_VENDOR,
    "devices": ATTR_DEVICE_ID,
    "pciAddresses": ATTR_PCI_ADDRESS,
    "pfNames": ATTR_PF_NAME,
    "pfPciAddresses": ATTR_PF_PCI_ADDRESS,
}
_LINK_TYPES = {"eth": "ethernet", "ethernet": "ethernet", "ib": "infiniband", "infiniband": "infiniband"}
_VALUE_TYPES = frozenset({"bool", "int", "string", "version", "bools", "ints", "strings", "versions"})


@dataclass(frozen=True)
class PolicyOutcome:
    """The advertised set with per-device policy attributes, and why other matches are withheld."""

    eligible: dict[str, dict[str, TypedAttribute]] = field(default_factory=dict)
    blocked: dict[str, str] = field(default_factory=dict)
    # Human-readable notes about ignored input (e.g. reserved keys a policy tried to set).
    warnings: list[str] = field(default_factory=list)


# -- selectors ---------------------------------------------------------------------------------


def _requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    op = req.get("operator")
    values = [str(v) for v in req.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            a, b = int(value), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics; an empty selector matches everything."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(
        _requirement_matches(r, labels.get(r.get("key", ""))) for r in selector.get("matchExpressions") or []
    )


def node_selector_matches(
    selector: Mapping[str, Any] | None, node_name: str, labels: Mapping[str, str]
) -> bool:
    """core/v1 NodeSelector semantics: no selector or no terms selects every node; terms are ORed
    and an empty term selects nothing (upstream treated it as everything)."""
    terms = (selector or {}).get("nodeSelectorTerms") or []
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_requirement_matches(r, labels.get(r.get("key", ""))) for r in exprs) and all(
            _requirement_matches(r, node_name if r.get("key") == "metadata.name" else None) for r in fields
        ):
            return True
    return False


# -- filters -----------------------------------------------------------------------------------


def _filter_matches(flt: Mapping[str, Any], vf: VirtualFunction) -> bool:
    for key, attr in _FILTER_KEYS.items():
        wanted = flt.get(key) or []
        if wanted and str(vf.attributes.get(attr, "")) not in wanted:
            return False
    link = str(flt.get("linkType") or "").lower()
    return not link or _LINK_TYPES.get(link) == vf.attributes.get(ATTR_LINK_TYPE)


def _unimplemented_filters(filters: Sequence[Mapping[str, Any]]) -> list[str]:
    problems = []
    for flt in filters:
        if flt.get("drivers"):
            problems.append("resourceFilters[].drivers is not implemented")
        if any("#" in str(n) for n in flt.get("pfNames") or []):
            problems.append("pfNames with a '#' VF range is not implemented")
    return problems


# -- attributes --------------------------------------------------------------------------------


def _check_attribute_values(attrs: Mapping[str, object], owner: str) -> None:
    for key, value in attrs.items():
        if not (isinstance(value, Mapping) and len(value) == 1 and set(value) <= _VALUE_TYPES):
            raise DriverCoreError(
                reasons.INVALID_DEVICE_ATTRIBUTE,
                f"{owner}: attribute {key} must have exactly one of {sorted(_VALUE_TYPES)}",
            )


def _config_attributes(
    config: Mapping[str, Any], attribute_objects: Sequence[Mapping[str, Any]], managed: bool, where: str
) -> dict[str, object]:
    """The merged attributes of one config; raises for an unresolved config."""
    if managed:
        problems = _unimplemented_filters(config.get("resourceFilters") or [])
        if problems:
            raise DriverCoreError(
                reasons.UNSUPPORTED_POLICY_FILTER,
                f"{where}: {'; '.join(problems)} in automatic mode; use vendors, devices, pfNames, "
                "pfPciAddresses, pciAddresses or linkType",
            )
    selector = config.get("deviceAttributesSelector")
    if selector is None:
        return {}
    matched = []
    for obj in attribute_objects:
        md = obj.get("metadata") or {}
        if label_selector_matches(selector, md.get("labels") or {}):
            attrs = (obj.get("spec") or {}).get("attributes") or {}
            _check_attribute_values(attrs, f"DeviceAttributes {md.get('name')}")
            matched.append(DeviceAttributesObject(name=str(md.get("name", "")), attributes=attrs))
    if managed and not matched:
        raise DriverCoreError(
            reasons.UNRESOLVED_DEVICE_ATTRIBUTES,
            f"{where}: deviceAttributesSelector matches no DeviceAttributes object; create it or fix the selector",
        )
    return merge_device_attributes(matched)


def evaluate(
    *,
    policies: Sequence[Mapping[str, Any]],
    device_attributes: Sequence[Mapping[str, Any]],
    node_name: str,
    node_labels: Mapping[str, str],
    inventory: Mapping[str, VirtualFunction],
    managed: bool = False,
) -> PolicyOutcome:
    """Decide the advertised devices of this node."""
    outcome = PolicyOutcome()
    claimed: set[str] = set()
    ordered = sorted(policies, key=lambda p: str((p.get("metadata") or {}).get("name", "")))
    for policy in ordered:
        spec = policy.get("spec") or {}
        pname = (policy.get("metadata") or {}).get("name")
        if not node_selector_matches(spec.get("nodeSelector"), node_name, node_labels):
            continue
        for index, config in enumerate(spec.get("configs") or []):
            where = f"SriovResourcePolicy {pname} configs[{index}]"
            filters = config.get("resourceFilters") or []
            members = [
                name
                for name, vf in sorted(inventory.items())
                if name not in claimed and (not filters or any(_filter_matches(f, vf) for f in filters))
            ]
            if not members:
                continue
            claimed.update(members)
            try:
                attrs = _config_attributes(config, device_attributes, managed, where)
            except DriverCoreError as exc:
                for name in members:
                    outcome.blocked[name] = f"{exc.reason}: {exc.message}"
                continue
            reserved = sorted(set(attrs) & RESERVED_ATTRIBUTES)
            if reserved:
                outcome.warnings.append(f"{where}: ignored reserved hardware attribute(s) {reserved}")
            kept = {
                k: dict(v)
                for k, v in attrs.items()
                if k not in RESERVED_ATTRIBUTES and isinstance(v, Mapping)
            }
            for name in members:
                outcome.eligible[name] = {k: dict(v) for k, v in kept.items()}
    return outcome
