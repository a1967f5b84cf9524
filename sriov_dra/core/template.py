"""Which source NAD a VF uses (spec 5.2: the per-device reference, else VfConfig's; if both exist
they must agree): per-device reference attributes versus VfConfig.

A reference's namespace stays symbolic ("" = the consuming Pod's namespace) until the Pod has
been verified; it is never defaulted from the policy, attribute object or driver namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sriov_contract.errors import ContractError
from sriov_contract.keys import DOMAIN
from sriov_contract.names import validate_dns_label, validate_dns_subdomain
from sriov_dra.core.errors import (
    CONFLICTING_TEMPLATE_REFERENCE,
    INVALID_TEMPLATE_REFERENCE,
    MISSING_NETWORK_TEMPLATE,
    DriverCoreError,
    fail,
)
from sriov_dra.core.vfconfig import VfConfig

NAME_ATTRIBUTE: Final = f"{DOMAIN}/netAttachDefName"
NAMESPACE_ATTRIBUTE: Final = f"{DOMAIN}/netAttachDefNamespace"
REFERENCE_ATTRIBUTES: Final = (NAME_ATTRIBUTE, NAMESPACE_ATTRIBUTE)
# The DRA limit on a string attribute value; longer NAD names must use the VfConfig path.
ATTRIBUTE_STRING_MAX: Final = 64


@dataclass(frozen=True, slots=True)
class TemplateRef:
    """A source NAD reference; an empty namespace means the verified Pod's namespace."""

    name: str
    namespace: str = ""

    def resolve(self, pod_namespace: str) -> NamespacedName:
        return NamespacedName(self.namespace or pod_namespace, self.name)

    def __str__(self) -> str:
        return f"{self.namespace or '<Pod namespace>'}/{self.name}"


@dataclass(frozen=True, slots=True, order=True)
class NamespacedName:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def _invalid(owner: str, why: str) -> DriverCoreError:
    return fail(INVALID_TEMPLATE_REFERENCE, f"{owner}: {why}", owner=owner)


def _checked(owner: str, ref: TemplateRef) -> TemplateRef:
    try:
        validate_dns_subdomain(ref.name, "netAttachDefName")
        if ref.namespace:
            validate_dns_label(ref.namespace, "netAttachDefNamespace")
    except ContractError as exc:
        raise _invalid(owner, f"{exc.message}; use the NAD's exact Kubernetes name") from exc
    return ref


def _string_attribute(attributes: Mapping[str, object], key: str, owner: str) -> str | None:
    if key not in attributes:
        return None
    value = attributes[key]
    text = value.get("string") if isinstance(value, Mapping) and len(value) == 1 else None
    if not isinstance(text, str):
        raise _invalid(owner, f"attribute {key} must be a single string value ({{string: ...}})")
    if len(text) > ATTRIBUTE_STRING_MAX:
        raise _invalid(
            owner,
            f"attribute {key} is {len(text)} characters, over the {ATTRIBUTE_STRING_MAX}-character "
            "attribute limit; it is never truncated: use a shorter NAD name or the VfConfig netAttachDefName",
        )
    return text


def reference_from_attributes(attributes: Mapping[str, object], owner: str) -> TemplateRef | None:
    """The NAD reference carried by device attributes, or None when neither key is present."""
    name = _string_attribute(attributes, NAME_ATTRIBUTE, owner)
    namespace = _string_attribute(attributes, NAMESPACE_ATTRIBUTE, owner)
    if name is None and namespace is None:
        return None
    if not name:
        raise _invalid(
            owner, f"{NAMESPACE_ATTRIBUTE} without a non-empty {NAME_ATTRIBUTE} is not a reference"
        )
    return _checked(owner, TemplateRef(name, namespace or ""))


def reference_from_vf_config(config: VfConfig, owner: str) -> TemplateRef | None:
    """The effective VfConfig's reference; a namespace alone is refused, not ignored."""
    if not config.net_attach_def_name:
        if config.net_attach_def_namespace:
            raise _invalid(owner, "VfConfig netAttachDefNamespace is set without netAttachDefName")
        return None
    return _checked(owner, TemplateRef(config.net_attach_def_name, config.net_attach_def_namespace))


def resolve_template(
    device_attributes: Mapping[str, object], vf_config: VfConfig, pod_namespace: str, device: str
) -> NamespacedName:
    """The concrete source NAD for one allocated device of a Pod already verified in `pod_namespace`."""
    validate_dns_label(pod_namespace, "pod namespace")
    from_device = reference_from_attributes(device_attributes, f"device {device} attributes")
    from_config = reference_from_vf_config(vf_config, f"VfConfig for device {device}")
    if from_device is not None and from_config is not None:
        chosen, other = from_device.resolve(pod_namespace), from_config.resolve(pod_namespace)
        if chosen != other:
            raise fail(
                CONFLICTING_TEMPLATE_REFERENCE,
                f"device {device} is mapped to NAD {chosen} by its attributes but the claim's VfConfig "
                f"selects {other}; remove netAttachDefName from the VfConfig or make them agree",
                device=device,
            )
        return chosen
    ref = from_device or from_config
    if ref is None:
        raise fail(
            MISSING_NETWORK_TEMPLATE,
            f"device {device} has no network template: neither its attributes nor the claim's VfConfig "
            f"name a NetworkAttachmentDefinition; add {NAME_ATTRIBUTE} via DeviceAttributes or "
            "netAttachDefName to the DeviceClass/claim VfConfig",
            device=device,
        )
    return ref.resolve(pod_namespace)
