"""The stable binding identity: canonical bytes, attachmentID, shadow name and config digest.

Canonical form (fixtures/README.md is normative): for each field in the order protocolVersion,
nodeUID, podUID, claimUID, driver, pool, device, the record `name:len:value\n`, where value is the
UTF-8 text (protocolVersion in decimal) and len its byte count in decimal. Length prefixes make
the form unambiguous for any Unicode value without an escaping rule that two languages could
implement differently.
"""

from __future__ import annotations

import functools
import hashlib

from sriov_contract import reasons
from sriov_contract.document import (
    check_fields,
    check_version,
    compact,
    get_str,
    load_object,
    require_version,
)
from sriov_contract.errors import ContractError
from sriov_contract.keys import PROTOCOL_VERSION, SHADOW_NAME_PREFIX
from sriov_contract.names import validate_sha256, validate_uid
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Final

__all__ = [
    "BindingIdentity",
    "config_sha256",
    "parse_identity",
    "shadow_name_for",
    "validate_sha256",
    "validate_uid",
]

SHADOW_DIGEST_CHARS: Final = 32
# UTF-8 byte limits mirror the Kubernetes limits on DRA driver, pool and device names; the
# content itself is not restricted because the identity must hash any allocation the API returns.
TEXT_LIMITS: Final = {"driver": 63, "pool": 253, "device": 63}
FIELDS: Final = ("protocolVersion", "nodeUID", "podUID", "claimUID", "driver", "pool", "device")
_WHAT: Final = "binding identity"


def _validate_text(value: str, field: str) -> str:
    limit = TEXT_LIMITS[field]
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        size = 0
    if not 1 <= size <= limit:
        raise ContractError(
            reasons.INVALID_IDENTITY_FIELD,
            f"{_WHAT} field {field} {value!r} must be valid Unicode text of 1-{limit} UTF-8 bytes",
            field=field,
            value=value,
        )
    return value


class BindingIdentity(TypedTuple):
    """The allocation a shadow NAD stands for; never includes versions, times or batch order."""

    protocol_version: int
    node_uid: str
    pod_uid: str
    claim_uid: str
    driver: str
    pool: str
    device: str

    def __post_init__(self) -> None:
        require_version(self.protocol_version, _WHAT, "protocolVersion", PROTOCOL_VERSION)
        validate_uid(self.node_uid, "nodeUID")
        validate_uid(self.pod_uid, "podUID")
        validate_uid(self.claim_uid, "claimUID")
        _validate_text(self.driver, "driver")
        _validate_text(self.pool, "pool")
        _validate_text(self.device, "device")

    def _values(self) -> tuple[str, ...]:
        return (
            str(self.protocol_version),
            self.node_uid,
            self.pod_uid,
            self.claim_uid,
            self.driver,
            self.pool,
            self.device,
        )

    def canonical_bytes(self) -> bytes:
        out = bytearray()
        for name, value in zip(FIELDS, self._values(), strict=True):
            raw = value.encode("utf-8")
            out += f"{name}:{len(raw)}:".encode("ascii") + raw + b"\n"
        return bytes(out)

    def attachment_id(self) -> str:
        return _attachment_id(self)

    def shadow_name(self) -> str:
        return shadow_name_for(self.attachment_id())

    def to_dict(self) -> dict[str, object]:
        return dict(zip(FIELDS, (self.protocol_version, *self._values()[1:]), strict=True))

    def to_json(self) -> str:
        return compact(self.to_dict())


# Every check and name derives from this hash, often several times per identity: an identity is
# immutable and its hash depends on its fields alone, so each is hashed once.
@functools.lru_cache(maxsize=8192)
def _attachment_id(identity: BindingIdentity) -> str:
    return hashlib.sha256(identity.canonical_bytes()).hexdigest()


def shadow_name_for(attachment_id: str) -> str:
    """The runtime NAD name; the full attachmentID stays in the binding to catch prefix collisions."""
    return SHADOW_NAME_PREFIX + validate_sha256(attachment_id, "attachmentID")[:SHADOW_DIGEST_CHARS]


def config_sha256(config: bytes) -> str:
    """Digest of the exact spec.config bytes the driver wrote, before any runtime additions."""
    return hashlib.sha256(config).hexdigest()


def parse_identity(text: str) -> BindingIdentity:
    """Decode the identity tuple's JSON form (fixtures and diagnostics; never an annotation)."""
    obj = load_object(text, _WHAT)
    check_version(obj, _WHAT, "protocolVersion", PROTOCOL_VERSION)
    check_fields(obj, _WHAT, FIELDS)
    values = [get_str(obj, name, _WHAT) for name in FIELDS[1:]]
    return BindingIdentity(PROTOCOL_VERSION, *values)
