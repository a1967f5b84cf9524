"""The Pod registry of driver-owned selections, keyed by full attachmentID, in selection order.

It records only what this driver owns, never the Pod's complete set of networks, so release can
drop exactly one claim's entries and leave manual and other claims' selections alone.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from sriov_contract import reasons
from sriov_contract.document import (
    check_fields,
    check_version,
    compact,
    get_list,
    get_str,
    load_object,
    require_version,
)
from sriov_contract.errors import ContractError
from sriov_contract.identity import shadow_name_for
from sriov_contract.keys import PROTOCOL_VERSION, REGISTRY_ANNOTATION
from sriov_contract.names import validate_dns_label, validate_interface, validate_sha256, validate_uid
from sriov_contract.selection import SelectionElement, validate_shadow_name
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Final

    from sriov_contract.document import JSONObject

FIELDS: Final = ("version", "podUID", "entries")
ENTRY_FIELDS: Final = ("attachmentID", "claimUID", "namespace", "name", "uid", "interface", "configSHA256")
_WHAT: Final = f"annotation {REGISTRY_ANNOTATION}"


class RegistryEntry(TypedTuple):
    attachment_id: str
    claim_uid: str
    namespace: str
    name: str
    uid: str
    interface: str
    config_sha256: str

    def __post_init__(self) -> None:
        validate_sha256(self.attachment_id, "attachmentID")
        validate_uid(self.claim_uid, "claimUID")
        validate_dns_label(self.namespace, "namespace")
        validate_shadow_name(self.name)
        validate_uid(self.uid, "uid")
        validate_interface(self.interface)
        validate_sha256(self.config_sha256, "configSHA256")
        if self.name != shadow_name_for(self.attachment_id):
            raise ContractError(
                reasons.SHADOW_NAME_MISMATCH,
                f"registry entry {self.name} does not match attachmentID {self.attachment_id} "
                f"(expected {shadow_name_for(self.attachment_id)}); the registry was edited",
                attachment_id=self.attachment_id,
            )

    def selection(self) -> SelectionElement:
        """The exact Pod selection this entry owns."""
        return SelectionElement(self.name, self.namespace, self.interface)

    def to_dict(self) -> JSONObject:
        return {
            "attachmentID": self.attachment_id,
            "claimUID": self.claim_uid,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "interface": self.interface,
            "configSHA256": self.config_sha256,
        }


def _first_repeat(values: Sequence[Hashable]) -> int | None:
    seen: set[Hashable] = set()
    for i, v in enumerate(values):
        if v in seen:
            return i
        seen.add(v)
    return None


class Registry(TypedTuple):
    version: int
    pod_uid: str
    entries: tuple[RegistryEntry, ...]

    def __post_init__(self) -> None:
        require_version(self.version, _WHAT, "version", PROTOCOL_VERSION)
        validate_uid(self.pod_uid, "podUID")
        checks = (
            (reasons.DUPLICATE_ATTACHMENT_ID, [e.attachment_id for e in self.entries]),
            (reasons.DUPLICATE_SELECTION, [(e.namespace, e.name) for e in self.entries]),
            (reasons.DUPLICATE_INTERFACE, [e.interface for e in self.entries]),
        )
        for reason, values in checks:
            index = _first_repeat(values)
            if index is not None:
                raise ContractError(
                    reason,
                    f"{_WHAT} of Pod {self.pod_uid} repeats {values[index]!r} at entry {index}; "
                    "each managed attachment must appear exactly once: repair the Pod annotations",
                    pod_uid=self.pod_uid,
                    index=index,
                )
        namespaces = {e.namespace for e in self.entries}
        if len(namespaces) > 1:
            raise ContractError(
                reasons.MIXED_NAMESPACES,
                f"{_WHAT} of Pod {self.pod_uid} names shadows in namespaces {sorted(namespaces)}; "
                "shadows live in the Pod namespace only",
                pod_uid=self.pod_uid,
            )

    def to_dict(self) -> JSONObject:
        return {
            "version": self.version,
            "podUID": self.pod_uid,
            "entries": [e.to_dict() for e in self.entries],
        }

    def to_json(self) -> str:
        return compact(self.to_dict())


def _entry(value: object, index: int) -> tuple[str, ...]:
    what = f"{_WHAT} entry {index}"
    if not isinstance(value, dict):
        raise ContractError(reasons.WRONG_TYPE, f"{what} must be an object", index=index)
    check_fields(value, what, ENTRY_FIELDS)
    return tuple(get_str(value, key, what) for key in ENTRY_FIELDS)


def parse_registry(text: str) -> Registry:
    """Strictly decode a registry annotation value; raises ContractError with a stable reason."""
    obj = load_object(text, _WHAT)
    check_version(obj, _WHAT, "version", PROTOCOL_VERSION)
    check_fields(obj, _WHAT, FIELDS)
    pod_uid = get_str(obj, "podUID", _WHAT)
    raw = [_entry(e, i) for i, e in enumerate(get_list(obj, "entries", _WHAT))]
    return Registry(PROTOCOL_VERSION, pod_uid, tuple(RegistryEntry(*e) for e in raw))
