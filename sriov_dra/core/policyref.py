"""Merging a policy's matching DeviceAttributes without letting the NAD reference drift (spec 5.3:
matching objects must agree on the NAD reference).

Ordinary keys keep upstream's rule: objects merge in name order and the last duplicate wins.
The two reference keys are different: each object must carry a complete reference of its own,
all objects that carry one must agree in symbolic form (an omitted namespace means "the Pod's",
which is not the same as any explicit namespace yet), and the merged result takes the whole
reference from one object so a name never pairs with another object's namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core.errors import CONFLICTING_TEMPLATE_REFERENCE, fail
from sriov_dra.core.template import REFERENCE_ATTRIBUTES, TemplateRef, reference_from_attributes


@dataclass(frozen=True, slots=True)
class DeviceAttributesObject:
    """One DeviceAttributes object: its name and spec.attributes."""

    name: str
    attributes: Mapping[str, object]


def merge_device_attributes(objects: Sequence[DeviceAttributesObject]) -> dict[str, object]:
    """Merge in ascending object-name order; refuse conflicting or split NAD references."""
    ordered = sorted(objects, key=lambda o: o.name)
    merged: dict[str, object] = {}
    reference: tuple[TemplateRef, DeviceAttributesObject] | None = None
    for obj in ordered:
        merged.update((k, v) for k, v in obj.attributes.items() if k not in REFERENCE_ATTRIBUTES)
        ref = reference_from_attributes(obj.attributes, f"DeviceAttributes {obj.name}")
        if ref is None:
            continue
        if reference is not None and reference[0] != ref:
            raise fail(
                CONFLICTING_TEMPLATE_REFERENCE,
                f"DeviceAttributes {reference[1].name} selects NAD {reference[0]} but {obj.name} selects "
                f"{ref}{_default_hint(reference[0], ref)}; make the matching objects agree or split "
                "them across non-overlapping policy configs",
                objects=[reference[1].name, obj.name],
            )
        reference = (ref, obj)
    if reference is not None:
        merged.update((k, v) for k, v in reference[1].attributes.items() if k in REFERENCE_ATTRIBUTES)
    return merged


def _default_hint(a: TemplateRef, b: TemplateRef) -> str:
    if a.name == b.name and not (a.namespace and b.namespace):
        return " (a defaulted Pod namespace is never assumed equal to an explicit one)"
    return ""
