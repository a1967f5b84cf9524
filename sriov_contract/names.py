"""Syntax of the identifiers the contract carries: UIDs, digests, Kubernetes names, PCI, ifnames.

Each validator returns its input unchanged or raises ContractError naming the offending field.
The rules are the ones fixtures/README.md specifies, so Go and Python agree byte for byte.
"""

from __future__ import annotations

from sriov_contract import reasons
from sriov_contract.errors import ContractError
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Final

DNS_SUBDOMAIN_MAX: Final = 253
IFNAME_MAX_BYTES: Final = 15

# Unicode White_Space plus C0/C1 controls: what libcni's ValidateInterfaceName calls space, made
# explicit so no implementation depends on its runtime's Unicode tables.
_IFNAME_FORBIDDEN: Final = frozenset(
    [chr(c) for c in range(0x00, 0x21)]
    + [chr(c) for c in range(0x7F, 0xA1)]
    + ["/", ":", "\u1680", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
    + [chr(c) for c in range(0x2000, 0x200B)]
)


def _fail(reason: str, field: str, value: object, rule: str) -> ContractError:
    return ContractError(reason, f"{field} {value!r} {rule}", field=field, value=value)


class _Syntax(TypedTuple):
    """A validator that returns its input unchanged or names the field and the rule it broke."""

    matches: Callable[[str], bool]
    reason: str
    rule: str
    default_field: str

    def __call__(self, value: str, field: str | None = None) -> str:
        if not self.matches(value):
            raise _fail(self.reason, field or self.default_field, value, self.rule)
        return value


# The rules are regular languages (fixtures/README.md gives them as patterns); they are checked
# here character by character because `re`, with the `enum` it imports, would be the heaviest
# module of a thin ADD that guards a managed shadow.
_HEX: Final = frozenset("0123456789abcdef")
_LOWER_ALNUM: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_LABEL_CHARS: Final = _LOWER_ALNUM | {"-"}
_VISIBLE_ASCII: Final = frozenset(chr(c) for c in range(0x21, 0x7F))


def is_lower_hex(text: str, size: int) -> bool:
    """Exactly `size` lowercase hexadecimal characters: [0-9a-f]{size}."""
    return len(text) == size and _HEX.issuperset(text)


def _is_uuid(text: str) -> bool:
    # [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}
    parts = text.split("-")
    return [len(p) for p in parts] == [8, 4, 4, 4, 12] and all(_HEX.issuperset(p) for p in parts)


def is_label_part(text: str) -> bool:
    """[a-z0-9]([-a-z0-9]*[a-z0-9])?: an RFC 1123 label with no length bound of its own."""
    return (
        bool(text) and text[0] in _LOWER_ALNUM and text[-1] in _LOWER_ALNUM and _LABEL_CHARS.issuperset(text)
    )


def _is_dns_label(text: str) -> bool:
    return len(text) <= 63 and is_label_part(text)


def _is_dns_subdomain(text: str) -> bool:
    # Kubernetes bounds only the whole subdomain, not each dot-separated part.
    return 0 < len(text) <= DNS_SUBDOMAIN_MAX and all(is_label_part(p) for p in text.split("."))


def _is_pci_address(text: str) -> bool:
    # [0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]
    return (
        len(text) == 12
        and text[4] == text[7] == ":"
        and text[10] == "."
        and _HEX.issuperset(text[0:4] + text[5:7] + text[9])
        and text[8] in "01"
        and text[11] in "01234567"
    )


# Kubernetes object UIDs as the API server generates them.
validate_uid = _Syntax(_is_uuid, reasons.INVALID_UID, "is not a lowercase 36-character UUID", "uid")
# A full digest, always compared byte for byte, never by prefix.
validate_sha256 = _Syntax(
    lambda text: is_lower_hex(text, 64),
    reasons.INVALID_SHA256,
    "is not 64 lowercase hexadecimal characters",
    "sha256",
)
# Namespaces.
validate_dns_label = _Syntax(
    _is_dns_label, reasons.INVALID_NAME, "is not an RFC 1123 label (1-63 of a-z, 0-9, '-')", "name"
)
# Node and NAD names.
validate_dns_subdomain = _Syntax(
    _is_dns_subdomain,
    reasons.INVALID_NAME,
    f"is not an RFC 1123 subdomain (1-{DNS_SUBDOMAIN_MAX} characters)",
    "name",
)
# A plain PCI BDF as discovery normalizes it, without a pci: prefix.
validate_pci_address = _Syntax(
    _is_pci_address,
    reasons.INVALID_PCI_ADDRESS,
    "is not a lowercase domain:bus:device.function",
    "pciAddress",
)
_RDMA_FIRST: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_RDMA_CHARS: Final = _RDMA_FIRST | {"-", "."}
# A kernel RDMA device name (mlx5_3, rocep59s0f1) or "" for none: ([A-Za-z0-9_][-A-Za-z0-9_.]{0,62})?
validate_rdma_device = _Syntax(
    lambda text: not text or (len(text) <= 63 and text[0] in _RDMA_FIRST and _RDMA_CHARS.issuperset(text)),
    reasons.INVALID_NAME,
    "is not empty or an RDMA device name (1-63 of A-Z, a-z, 0-9, '_', '-', '.', not starting with '-' or '.')",
    "rdmaDevice",
)
# Opaque to us, but restricted so every JSON encoder writes it identically: [!-~]{1,128}.
validate_resource_version = _Syntax(
    lambda text: 0 < len(text) <= 128 and _VISIBLE_ASCII.issuperset(text),
    reasons.INVALID_RESOURCE_VERSION,
    "is not 1-128 visible ASCII characters",
    "resourceVersion",
)


def validate_interface(value: str, field: str = "interface") -> str:
    """A Linux interface name: 1-15 UTF-8 bytes, not '.'/'..', no '/', ':', control or space."""
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form
        size = 0
    if (
        not 1 <= size <= IFNAME_MAX_BYTES
        or value in {".", ".."}
        or any(ch in _IFNAME_FORBIDDEN for ch in value)
    ):
        raise _fail(
            reasons.INVALID_INTERFACE_NAME,
            field,
            value,
            f"is not a Linux interface name (1-{IFNAME_MAX_BYTES} UTF-8 bytes, not '.' or '..', "
            "no '/', ':', control or white-space characters)",
        )
    return value
