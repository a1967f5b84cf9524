"""The driver core's error type; its reasons are defined in sriov_dra.reasons (shared ones in
sriov_contract.reasons) and re-exported here for the core modules."""

from __future__ import annotations

from typing import Any

from sriov_contract.errors import ReasonedError
from sriov_contract.reasons import INVALID_INTERFACE_NAME, INVALID_PCI_ADDRESS
from sriov_dra.reasons import (
    ANNOTATION_TOO_LARGE,
    CONFLICTING_DEVICE_REQUIREMENTS,
    CONFLICTING_TEMPLATE_REFERENCE,
    DUPLICATE_INTERFACE_NAME,
    DUPLICATE_PCI_ADDRESS,
    INVALID_TEMPLATE_REFERENCE,
    INVALID_VF_CONFIG,
    MANAGED_SELECTION_CONFLICT,
    MANUAL_SELECTION_CONFLICT,
    MISSING_NETWORK_TEMPLATE,
    PCI_ADDRESS_MISMATCH,
    UNREFERENCED_CLAIM,
    UNSUPPORTED_CNI_CONFIG,
)

__all__ = [
    "ANNOTATION_TOO_LARGE",
    "CONFLICTING_DEVICE_REQUIREMENTS",
    "CONFLICTING_TEMPLATE_REFERENCE",
    "DUPLICATE_INTERFACE_NAME",
    "DUPLICATE_PCI_ADDRESS",
    "INVALID_INTERFACE_NAME",
    "INVALID_PCI_ADDRESS",
    "INVALID_TEMPLATE_REFERENCE",
    "INVALID_VF_CONFIG",
    "MANAGED_SELECTION_CONFLICT",
    "MANUAL_SELECTION_CONFLICT",
    "MISSING_NETWORK_TEMPLATE",
    "PCI_ADDRESS_MISMATCH",
    "UNREFERENCED_CLAIM",
    "UNSUPPORTED_CNI_CONFIG",
    "DriverCoreError",
    "fail",
]


class DriverCoreError(ReasonedError):
    """A pure driver-core check refused its input."""


def fail(reason: str, message: str, **details: Any) -> DriverCoreError:
    return DriverCoreError(reason, message, **details)
