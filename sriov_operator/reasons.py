"""Every stable reason sriov-operator reports, in one catalogue, and its typed error.

Condition reasons are API: dashboards and runbooks match on them, so they never change spelling.
The DRAConfigurationReady reasons are spec 12.2.6's; the Ready reasons are upstream's.
"""

from __future__ import annotations

from typing import Any, Final

from sriov_contract.errors import ReasonedError

# DRAConfigurationReady on SriovNetworkNodePolicy (spec 12.2.6).
DRA_CONFIGURATION_APPLIED: Final = "DRAConfigurationApplied"
INVALID_DRA_ATTRIBUTE: Final = "InvalidDRAAttribute"
DRA_INACTIVE: Final = "DRAInactive"
SRIOV_NETWORK_NOT_FOUND: Final = "SriovNetworkNotFound"
SOURCE_ACCESS_DENIED: Final = "SourceAccessDenied"
SRIOV_NETWORK_NOT_READY: Final = "SriovNetworkNotReady"
SOURCE_NAD_NOT_READY: Final = "SourceNADNotReady"
UNSUPPORTED_MANAGED_SELECTOR: Final = "UnsupportedManagedSelector"
CONFLICTING_DRA_MAPPING: Final = "ConflictingDRAMapping"
DRA_CONFIGURATION_SYNC_FAILED: Final = "DRAConfigurationSyncFailed"

# When several problems affect one policy, the condition names the first of these: the one the
# administrator must fix first (a bad attribute map hides everything behind it).
DRA_REASON_PRECEDENCE: Final = (
    INVALID_DRA_ATTRIBUTE,
    DRA_INACTIVE,
    SRIOV_NETWORK_NOT_FOUND,
    SOURCE_ACCESS_DENIED,
    SRIOV_NETWORK_NOT_READY,
    SOURCE_NAD_NOT_READY,
    UNSUPPORTED_MANAGED_SELECTOR,
    CONFLICTING_DRA_MAPPING,
    DRA_CONFIGURATION_SYNC_FAILED,
)

# Ready on SriovNetwork (upstream's api/v1/conditions.go spellings).
NETWORK_READY: Final = "NetworkReady"
NAD_NOT_FOUND: Final = "NetworkAttachmentDefinitionNotFound"
NAD_INVALID: Final = "NetworkAttachmentDefinitionInvalid"
NAMESPACE_NOT_FOUND: Final = "NamespaceNotFound"

# Process-level failures (CLI, configuration, API access).
INVALID_CONFIGURATION: Final = "InvalidOperatorConfiguration"
API_REQUEST_FAILED: Final = "ApiRequestFailed"
NODE_INVENTORY_UNREADABLE: Final = "NodeInventoryUnreadable"


class OperatorError(ReasonedError):
    """A refusal or failure with one of the reasons above and a message naming object and fix."""


def fail(reason: str, message: str, **details: Any) -> OperatorError:
    return OperatorError(reason, message, **details)


class ApiError(OperatorError):
    """A failed API call; `status` is the HTTP status, 0 when no response arrived."""

    @property
    def status(self) -> int:
        return int(self.details.get("status", 0))
