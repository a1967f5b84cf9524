"""Validation of SriovNetworkNodePolicy.spec.dra (spec 12.2.1, 12.2.2), repeated from the CRD.

The CRD's schema and CEL refuse most bad input at admission, but an object stored before the CRD
was upgraded, or written with validation ignored, must not produce unsafe output: every rule is
checked again here and a failure makes the policy unresolved (InvalidDRAAttribute, nothing
generated). Presence, never truthiness, decides a union member: `false` and `0` are values.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sriov_operator.core.keys import (
    DISCOVERY_ATTRIBUTES,
    GENERATED_ATTRIBUTES,
    MAX_DEVICE_ATTRIBUTES,
    MAX_VALUE_LENGTH,
    REF_NAME_KEY,
    REF_NAMESPACE_KEY,
    REFERENCE_KEYS,
)
from sriov_operator.reasons import INVALID_DRA_ATTRIBUTE, fail

MEMBERS: Final = ("int", "bool", "string", "version")
_DNS_LABEL: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN: Final = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAMESPACE: Final = re.compile(_DNS_LABEL)
_C_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEMVER: Final = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(-(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?"
)
_INT64: Final = (-(2**63), 2**63 - 1)
PREFIX_MAX: Final = 63
SUFFIX_MAX: Final = 32
NAMESPACE_MAX: Final = 63


@dataclass(frozen=True, order=True)
class NetworkRef:
    """The SriovNetwork a policy references: its own namespace, never defaulted."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class DraBlock:
    """A validated dra block: ordinary custom attributes (deep copies) and the optional reference."""

    attributes: Mapping[str, Mapping[str, Any]]
    reference: NetworkRef | None


def key_problem(key: str) -> str | None:
    """Why `key` is not a fully qualified DRA attribute name, or None."""
    prefix, slash, suffix = key.partition("/")
    if not slash:
        return "is not qualified: use <DNS subdomain>/<C identifier>, e.g. example.com/rail"
    if len(prefix) > PREFIX_MAX or not _DNS_SUBDOMAIN.fullmatch(prefix):
        return f"has a prefix that is not a lower-case DNS subdomain of at most {PREFIX_MAX} characters"
    if len(suffix) > SUFFIX_MAX or not _C_IDENTIFIER.fullmatch(suffix):
        return f"has a name that is not a C identifier of at most {SUFFIX_MAX} characters"
    return None


def value_problem(value: object) -> str | None:
    """Why `value` is not one scalar DRA attribute value, or None."""
    if not isinstance(value, Mapping):
        return "must be an object with exactly one of int, bool, string or version"
    unknown = sorted(set(value) - set(MEMBERS))
    if unknown:
        return f"has unsupported member(s) {unknown}; only int, bool, string and version are allowed"
    present = [m for m in MEMBERS if value.get(m) is not None]
    if len(present) != 1:
        return f"must set exactly one of int, bool, string or version (found {len(present)})"
    member = present[0]
    scalar = value[member]
    if member == "int":
        if isinstance(scalar, bool) or not isinstance(scalar, int) or not _INT64[0] <= scalar <= _INT64[1]:
            return "int must be a 64-bit integer"
    elif member == "bool":
        if not isinstance(scalar, bool):
            return "bool must be true or false"
    elif not isinstance(scalar, str):
        return f"{member} must be a string"
    elif len(scalar) > MAX_VALUE_LENGTH:
        # Never truncated: a shortened value would silently select something else.
        return f"{member} is {len(scalar)} characters; the limit is {MAX_VALUE_LENGTH}"
    elif member == "version" and not _SEMVER.fullmatch(scalar):
        return "version must be a semantic version 2.0.0 string such as 1.2.3"
    return None


def _reference(attrs: Mapping[str, Any], problems: list[str]) -> NetworkRef | None:
    present = sorted(REFERENCE_KEYS & set(attrs))
    if not present:
        return None
    if len(present) == 1:
        (missing,) = REFERENCE_KEYS - set(present)
        problems.append(f"{present[0]} is set without {missing}; set both or neither")
        return None
    name, namespace = attrs[REF_NAME_KEY], attrs[REF_NAMESPACE_KEY]
    values = []
    before = len(problems)
    for key, value, pattern, limit in (
        (REF_NAME_KEY, name, _DNS_SUBDOMAIN, MAX_VALUE_LENGTH),
        (REF_NAMESPACE_KEY, namespace, _NAMESPACE, NAMESPACE_MAX),
    ):
        text = value.get("string") if isinstance(value, Mapping) and len(value) == 1 else None
        if not isinstance(text, str) or len(text) > limit or not pattern.fullmatch(text):
            problems.append(
                f"{key} must be {{string: <name>}} with a valid Kubernetes object "
                f"{'name' if key == REF_NAME_KEY else 'namespace'} of at most {limit} characters"
            )
        values.append(text)
    if len(problems) > before:
        return None
    return NetworkRef(namespace=str(values[1]), name=str(values[0]))


def validate_dra(where: str, dra: object, *, is_default_policy: bool) -> DraBlock:
    """The validated block of a non-nil spec.dra, or InvalidDRAAttribute naming every problem.

    `where` names the policy in messages (e.g. "SriovNetworkNodePolicy ns/name").
    """
    if is_default_policy:
        raise fail(
            INVALID_DRA_ATTRIBUTE,
            f"{where}: the default bootstrap policy cannot carry spec.dra; remove it and create a "
            "separate policy for the DRA attributes",
        )
    if not isinstance(dra, Mapping) or not isinstance(dra.get("attributes") or {}, Mapping):
        raise fail(INVALID_DRA_ATTRIBUTE, f"{where}: spec.dra must be an object whose attributes is a map")
    attrs: Mapping[str, Any] = dra.get("attributes") or {}
    problems: list[str] = []
    if len(attrs) > MAX_DEVICE_ATTRIBUTES:
        problems.append(
            f"spec.dra.attributes has {len(attrs)} keys; at most {MAX_DEVICE_ATTRIBUTES} are allowed"
        )
    for key in sorted(attrs):
        if key in DISCOVERY_ATTRIBUTES:
            problems.append(f"{key} is published by the driver's discovery and cannot be set")
        elif key in GENERATED_ATTRIBUTES:
            problems.append(f"{key} is generated by the operator; reference a SriovNetwork instead")
        else:
            for found in (key_problem(key), None if key in REFERENCE_KEYS else value_problem(attrs[key])):
                if found:
                    problems.append(f"{key} {found}")
    reference = _reference(attrs, problems)
    if not problems:
        # The generated resourceName and NAD pair count against the same per-device budget; the
        # driver checks the final total with the discovered attributes and withholds the device
        # if it is over.
        custom = len(attrs) - (2 if reference else 0)
        generated = 1 + (2 if reference else 0)
        if custom + generated > MAX_DEVICE_ATTRIBUTES:
            problems.append(
                f"{custom} custom plus {generated} generated attributes exceed the device budget "
                f"of {MAX_DEVICE_ATTRIBUTES}; remove custom attributes"
            )
    if problems:
        raise fail(INVALID_DRA_ATTRIBUTE, f"{where}: " + "; ".join(problems) + "; fix spec.dra.attributes")
    ordinary = {k: copy.deepcopy(dict(v)) for k, v in attrs.items() if k not in REFERENCE_KEYS}
    return DraBlock(attributes=ordinary, reference=reference)
