"""Syntax of the identifiers the contract carries: UIDs, digests, Kubernetes names, PCI, ifnames.

Each validator returns its input unchanged or raises ContractError naming the offending field.
The rules are the ones fixtures/README.md specifies, so Go and Python agree byte for byte.
"""

from __future__ import annotations

import re

from sriov_contract import reasons
from sriov_contract.errors import ContractError
from sriov_contract.record import Record

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
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


class _Syntax(Record):
    """A validator that returns its input unchanged or names the field and the rule it broke."""

    pattern: re.Pattern[str]
    reason: str
    rule: str
    default_field: str

    def __call__(self, value: str, field: str | None = None) -> str:
        if not self.pattern.fullmatch(value):
            raise _fail(self.reason, field or self.default_field, value, self.rule)
        return value


_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
# Kubernetes bounds only the whole subdomain, not each dot-separated part.
_PART = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"

# Kubernetes object UIDs as the API server generates them.
validate_uid = _Syntax(
    re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
    reasons.INVALID_UID,
    "is not a lowercase 36-character UUID",
    "uid",
)
# A full digest, always compared byte for byte, never by prefix.
validate_sha256 = _Syntax(
    re.compile(r"[0-9a-f]{64}"),
    reasons.INVALID_SHA256,
    "is not 64 lowercase hexadecimal characters",
    "sha256",
)
# Namespaces.
validate_dns_label = _Syntax(
    re.compile(_LABEL), reasons.INVALID_NAME, "is not an RFC 1123 label (1-63 of a-z, 0-9, '-')", "name"
)
# Node and NAD names.
validate_dns_subdomain = _Syntax(
    re.compile(rf"(?=.{{1,{DNS_SUBDOMAIN_MAX}}}\Z){_PART}(?:\.{_PART})*", re.DOTALL),
    reasons.INVALID_NAME,
    f"is not an RFC 1123 subdomain (1-{DNS_SUBDOMAIN_MAX} characters)",
    "name",
)
# A plain PCI BDF as discovery normalizes it, without a pci: prefix.
validate_pci_address = _Syntax(
    re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]"),
    reasons.INVALID_PCI_ADDRESS,
    "is not a lowercase domain:bus:device.function",
    "pciAddress",
)
# Opaque to us, but restricted so every JSON encoder writes it identically.
validate_resource_version = _Syntax(
    re.compile(r"[!-~]{1,128}"),
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
