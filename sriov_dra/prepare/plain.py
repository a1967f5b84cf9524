"""NodePrepareResources / NodeUnprepareResources for VFs without managed network bindings.

Per claim: fetch it, keep only this driver's allocation results, resolve each result's VfConfig,
bind the VF driver, write the claim's CDI spec, checkpoint, then refresh the Pod-global CDI spec
(sriov_dra.prepare.host.HostDevices does the host steps). A failure rolls back what this claim
changed and is reported for that claim only. A claim that is already in the checkpoint is
answered from it (and a lost CDI spec is rewritten: after a reboot the tmpfs spec directory is
empty while the checkpoint survives).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sriov_dra import reasons
from sriov_dra.kubeletplugin.api import ClaimRef, DeviceResult, PrepareOutcome
from sriov_dra.ports import ClaimReader
from sriov_dra.prepare.host import HostDevices, PrepareError
from sriov_dra.prepare.nodeservice import fetch_claim, prepare_each, results, unprepare_each
from sriov_dra.state.checkpoint import PreparedClaims


class PlainPreparer:
    """The NodeService when --multus-auto-attach is off: claims in, per-claim outcomes out."""

    def __init__(self, *, claims: ClaimReader, devices: HostDevices, checkpoint: PreparedClaims) -> None:
        self._claims = claims
        self._devices = devices
        self._checkpoint = checkpoint

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        return prepare_each(claims, self._prepare_claim)

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        return unprepare_each(claims, lambda ref: self._devices.release_claim(ref.uid))

    def _prepare_claim(self, ref: ClaimRef) -> tuple[DeviceResult, ...]:
        claim = fetch_claim(self._claims, ref)
        where = f"claim {ref.namespace}/{ref.name}"
        recorded = self._checkpoint.snapshot_claim(ref.uid)
        if recorded is not None:
            consumer = _consumer_pod(claim, where)
            if consumer != recorded.pod_uid:
                raise PrepareError(
                    reasons.CLAIM_RELEASE_IN_PROGRESS,
                    f"{where} is still prepared for Pod {recorded.pod_uid}; Pod {consumer} can use it "
                    "once kubelet has unprepared it for the old Pod",
                )
            self._devices.ensure_cdi(recorded)
            return results(recorded)
        allocated = self._devices.allocated(claim, where)
        pod_uid = _consumer_pod(claim, where)
        return results(self._devices.prepare_devices(ref, pod_uid, allocated))


def _consumer_pod(claim: Mapping[str, Any], where: str) -> str:
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    pods = [r for r in reserved if r.get("resource") == "pods" and not r.get("apiGroup")]
    if len(reserved) != 1 or len(pods) != 1 or not pods[0].get("uid"):
        raise PrepareError(
            reasons.UNSUPPORTED_CONSUMER,
            f"{where} must be reserved for exactly one Pod (found {len(reserved)} consumer(s)); "
            "VF claims cannot be shared",
        )
    return str(pods[0]["uid"])
