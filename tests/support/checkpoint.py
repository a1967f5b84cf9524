"""Reading the driver's checkpoint where a test expects a claim to be prepared.

`snapshot_claim` answers None for an unknown claim; these helpers turn that into a test failure
that names the claim, instead of an AttributeError on None three lines later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.state.checkpoint import PreparedClaims


def prepared_claim(store: PreparedClaims, claim_uid: str) -> ClaimRecord:
    record = store.snapshot_claim(claim_uid)
    if record is None:
        pytest.fail(f"claim {claim_uid} is not in the checkpoint, but the test expects it prepared")
    return record


def managed_binding(store: PreparedClaims, claim_uid: str, device: int = 0) -> Mapping[str, Any]:
    binding = prepared_claim(store, claim_uid).devices[device].managed_binding
    if binding is None:
        pytest.fail(f"device {device} of claim {claim_uid} has no managed-binding record in the checkpoint")
    return binding
