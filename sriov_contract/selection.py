"""A generated Pod network selection element: only standard Multus fields, nothing tenant-tunable."""

from __future__ import annotations

from sriov_contract import reasons
from sriov_contract.document import check_fields, compact, get_str, load_object
from sriov_contract.errors import ContractError
from sriov_contract.identity import SHADOW_DIGEST_CHARS
from sriov_contract.keys import SHADOW_NAME_PREFIX
from sriov_contract.names import is_lower_hex, validate_dns_label, validate_interface
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Final

    from sriov_contract.document import JSONObject

FIELDS: Final = ("name", "namespace", "interface")
_WHAT: Final = "generated network selection"


def validate_shadow_name(value: str, field: str = "name") -> str:
    """dra-sriov- plus 32 lowercase hex characters; anything else is not a generated shadow."""
    prefix, digest = value[: len(SHADOW_NAME_PREFIX)], value[len(SHADOW_NAME_PREFIX) :]
    if prefix != SHADOW_NAME_PREFIX or not is_lower_hex(digest, SHADOW_DIGEST_CHARS):
        raise ContractError(
            reasons.INVALID_SHADOW_NAME,
            f"{field} {value!r} is not a generated shadow name ({SHADOW_NAME_PREFIX} + "
            f"{SHADOW_DIGEST_CHARS} lowercase hex characters)",
            field=field,
            value=value,
        )
    return value


class SelectionElement(TypedTuple):
    name: str
    namespace: str
    interface: str

    def __post_init__(self) -> None:
        validate_shadow_name(self.name)
        validate_dns_label(self.namespace, "namespace")
        validate_interface(self.interface)

    def to_dict(self) -> JSONObject:
        return {"name": self.name, "namespace": self.namespace, "interface": self.interface}

    def to_json(self) -> str:
        return compact(self.to_dict())


def parse_selection(text: str) -> SelectionElement:
    """Strictly decode one generated selection element (no version: it is plain Multus syntax)."""
    obj = load_object(text, _WHAT)
    check_fields(obj, _WHAT, FIELDS)
    return SelectionElement(*(get_str(obj, key, _WHAT) for key in FIELDS))
