"""Stable reasons for every refusal the driver core can produce."""

from __future__ import annotations

from typing import Any, Final

from sriov_contract.errors import ReasonedError

MISSING_NETWORK_TEMPLATE: Final = "MissingNetworkTemplate"
INVALID_TEMPLATE_REFERENCE: Final = "InvalidTemplateReference"
CONFLICTING_TEMPLATE_REFERENCE: Final = "ConflictingTemplateReference"
INVALID_VF_CONFIG: Final = "InvalidVfConfig"
UNSUPPORTED_CNI_CONFIG: Final = "UnsupportedCNIConfig"
INVALID_PCI_ADDRESS: Final = "InvalidPCIAddress"
PCI_ADDRESS_MISMATCH: Final = "PCIAddressMismatch"
INVALID_INTERFACE_NAME: Final = "InvalidInterfaceName"
DUPLICATE_INTERFACE_NAME: Final = "DuplicateInterfaceName"
CONFLICTING_DEVICE_REQUIREMENTS: Final = "ConflictingDeviceRequirements"
DUPLICATE_PCI_ADDRESS: Final = "DuplicatePCIAddress"
UNREFERENCED_CLAIM: Final = "ClaimNotReferencedByPod"
ANNOTATION_TOO_LARGE: Final = "AnnotationTooLarge"
MANUAL_SELECTION_CONFLICT: Final = "ManualSelectionConflictsWithManagedTemplate"
MANAGED_SELECTION_CONFLICT: Final = "ManagedSelectionConflict"


class DriverCoreError(ReasonedError):
    """A pure driver-core check refused its input."""


def fail(reason: str, message: str, **details: Any) -> DriverCoreError:
    return DriverCoreError(reason, message, **details)
