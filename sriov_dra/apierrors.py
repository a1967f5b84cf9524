"""Typed Kubernetes API failures, so orchestration can branch on them without the API client.

Adapters translate HTTP statuses into these; orchestration retries 409/422 after re-reading,
treats 403 as an access problem that keeps all recovery state, and treats a missing response
(status 0) or a server error as "the write may or may not have happened": re-read to find out.
"""

from __future__ import annotations

import re
from typing import Final

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons

NOT_FOUND: Final = 404
CONFLICT: Final = 409
INVALID: Final = 422
# 409 is a resourceVersion/precondition conflict; 422 is what a failed JSON Patch `test` returns.
RETRYABLE_CONFLICTS: Final = frozenset({CONFLICT, INVALID})

_REASONS: Final = {
    403: reasons.ACCESS_DENIED,
    NOT_FOUND: reasons.NOT_FOUND,
    CONFLICT: reasons.CONFLICT,
    INVALID: reasons.INVALID,
}


# The API server quotes a rejected field's value in its message ('spec.config: Invalid value:
# "{...}"'). For a NAD that value is the CNI config with its IPAM settings, which must never reach
# our logs or Events; the field path and the rule it broke are what an operator needs.
_QUOTED_VALUE: Final = re.compile(r'Invalid value: "(?:[^"\\]|\\.)*"')
MAX_DETAIL: Final = 1024  # generous: a 253-character object name appears in it more than once


def server_detail(message: str) -> str:
    """The API server's message as we may repeat it: field values omitted, length bounded."""
    kept = _QUOTED_VALUE.sub('Invalid value: "<omitted>"', message)
    return kept if len(kept) <= MAX_DETAIL else kept[: MAX_DETAIL - 3] + "..."


class ApiError(ReasonedError):
    """A failed API call; `status` is the HTTP status, 0 when no response arrived."""

    @property
    def status(self) -> int:
        return int(self.details.get("status", 0))

    @property
    def outcome_unknown(self) -> bool:
        """True when the request may have been applied although it reported failure."""
        return self.status == 0 or self.status >= 500

    @property
    def retryable(self) -> bool:
        """A fresh read decides what to do next: the object changed, or the outcome is unknown."""
        return self.status in RETRYABLE_CONFLICTS or self.outcome_unknown


def api_error(status: int, verb: str, what: str, detail: str = "", *, reason: str | None = None) -> ApiError:
    """The error for `verb` on `what` (e.g. "create", "NetworkAttachmentDefinition ns/name").

    `reason` replaces the status's own reason where the adapter names the object's failure
    (ClaimNotFound, ClaimReadFailed); the status, message and hint stay the mapping's."""
    reason = reason or _REASONS.get(status, reasons.API_REQUEST_FAILED)
    said = f": {server_detail(detail)}" if detail else ""
    if status == 403:
        hint = (
            "grant the driver's ServiceAccount the rights in deploy/base/driver-rbac.yaml; the binding's "
            "state is kept and kubelet retries"
        )
    elif status == 0:
        hint = "no response arrived (the request may have been applied); kubelet retries"
    else:
        hint = "kubelet retries"
    return ApiError(reason, f"{verb} {what} failed with HTTP {status}{said}; {hint}", status=status)
