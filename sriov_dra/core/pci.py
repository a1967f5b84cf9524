"""Allocated PCI addresses in the one form shadows and bindings carry: 0000:03:00.1."""

from __future__ import annotations

import re

from sriov_dra.core.errors import INVALID_PCI_ADDRESS, fail

# Domain, bus, device (5 bits) and function (3 bits); hex digits in either case on input.
_BDF = re.compile(r"([0-9a-f]{4}):([0-9a-f]{2}):([01][0-9a-f])\.([0-7])")


def normalize_pci_address(value: str) -> str:
    """Lower-case a plain domain:bus:device.function; anything else (e.g. a pci: prefix) is refused."""
    lowered = value.lower()
    if not _BDF.fullmatch(lowered):
        raise fail(
            INVALID_PCI_ADDRESS,
            f"PCI address {value!r} is not a plain domain:bus:device.function such as 0000:03:00.1; "
            "pass the allocated VF's address from discovery without a pci: prefix",
            value=value,
        )
    return lowered
