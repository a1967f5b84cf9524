"""What both NodeServices (sriov_dra.prepare.plain, sriov_dra.prepare.managed) answer kubelet with:
each claim run on its own, its failure turned into that claim's error string; the live claim
kubelet names; and a prepared claim's devices."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.kubeletplugin.api import ClaimRef, DeviceResult, PrepareOutcome
from sriov_dra.ports import ClaimReader
from sriov_dra.prepare.host import PrepareError

log = logging.getLogger(__name__)


def _describe(error: BaseException) -> str:
    if isinstance(error, ReasonedError):
        return f"{error.reason}: {error.message}"
    return f"InternalError: {error.__class__.__name__}: {error}; see the driver log"


def prepare_each(
    claims: Sequence[ClaimRef], prepare: Callable[[ClaimRef], tuple[DeviceResult, ...]]
) -> dict[str, PrepareOutcome]:
    """Run `prepare` per claim; one claim's failure never affects another's outcome."""
    out: dict[str, PrepareOutcome] = {}
    for ref in claims:
        try:
            out[ref.uid] = PrepareOutcome(devices=prepare(ref))
        except Exception as exc:
            if not isinstance(exc, ReasonedError):
                log.exception("preparing claim %s/%s (%s) failed", ref.namespace, ref.name, ref.uid)
            out[ref.uid] = PrepareOutcome(error=_describe(exc))
    return out


def unprepare_each(claims: Sequence[ClaimRef], unprepare: Callable[[ClaimRef], None]) -> dict[str, str]:
    """Run `unprepare` per claim: "" for success, else the reason."""
    out: dict[str, str] = {}
    for ref in claims:
        try:
            unprepare(ref)
            out[ref.uid] = ""
        except Exception as exc:
            if not isinstance(exc, ReasonedError):
                log.exception("unpreparing claim %s/%s (%s) failed", ref.namespace, ref.name, ref.uid)
            out[ref.uid] = _describe(exc)
    return out


def fetch_claim(claims: ClaimReader, ref: ClaimRef) -> Mapping[str, Any]:
    """The live claim, which must still be the one kubelet names."""
    claim = claims.get_claim(ref.namespace, ref.name)
    uid = claim.get("metadata", {}).get("uid")
    if uid != ref.uid:
        raise PrepareError(
            reasons.CLAIM_REPLACED,
            f"claim {ref.namespace}/{ref.name} now has UID {uid}, kubelet asked for {ref.uid}; the "
            "claim was recreated",
        )
    return claim


def results(record: ClaimRecord) -> tuple[DeviceResult, ...]:
    """A prepared claim's answer to kubelet: each device with its CDI device IDs."""
    return tuple(DeviceResult(d.request_names, d.pool, d.device, d.cdi_device_ids) for d in record.devices)
