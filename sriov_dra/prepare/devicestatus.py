"""Reporting managed bindings in ResourceClaim `status.devices`: best effort, conflict-safe.

What `kubectl get resourceclaim -o yaml` shows a DRA user: one entry per Ready binding with its
attachment ID, shadow, source, PCI address and interface, a Ready condition, and, once the CNI
shim has written the Pod's network-status, the interface's addresses. It is diagnostics only
(spec 6.4): nothing on the CNI path reads it, and a failed write never fails a prepare or a
release. A write is one JSON Patch of status.devices guarded by a `test` of the resourceVersion
read; a conflict re-reads and re-merges with upstream's status-update backoff, and an unchanged
list is never written.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from sriov_contract.errors import ReasonedError
from sriov_contract.keys import NETWORK_STATUS_ANNOTATION
from sriov_dra.apierrors import RETRYABLE_CONFLICTS, ApiError
from sriov_dra.core.backoff import backoff
from sriov_dra.core.bindingrecord import READY, BindingRecord
from sriov_dra.core.devicestatus import (
    DeviceReport,
    StatusKey,
    desired_entry,
    merge_device_status,
    network_data,
    remove_device_status,
)
from sriov_dra.model import DRIVER_NAME
from sriov_dra.ports import ClaimStatusApi
from sriov_dra.reasons import CLAIM_NOT_FOUND, DEVICE_STATUS_FORBIDDEN, SHADOW_READY

# Upstream's status-update backoff (dra-driver.md 4.2): 100 ms, doubling, 10 % jitter, 5 steps, 2 s cap.
BACKOFF_INITIAL: Final = 0.1
BACKOFF_FACTOR: Final = 2.0
BACKOFF_JITTER: Final = 0.1
BACKOFF_STEPS: Final = 5
BACKOFF_CAP: Final = 2.0
# A repair pass woken by the shadow a prepare just created has usually read the claim before that
# prepare's status write; skipping patient writes this long avoids a refused patch and a re-read.
SETTLE_AFTER_WRITE: Final = 5.0
_FORBIDDEN_FIELD: Final = "status.devices: Forbidden"


def conflict_delay(attempt: int, r: float) -> float:
    """Sleep before retry `attempt` (0-based) after a conflict, for r in [0, 1)."""
    base = min(BACKOFF_CAP, BACKOFF_INITIAL * BACKOFF_FACTOR**attempt)
    return base * (1.0 + BACKOFF_JITTER * r)


def binding_report(binding: BindingRecord, pod: Mapping[str, Any]) -> DeviceReport:
    """The status of one Ready binding; the Pod's network-status supplies its addresses."""
    shadow = f"{binding.pod_namespace}/{binding.shadow_name}"
    data: dict[str, Any] = {
        "attachmentID": binding.attachment_id,
        "interface": binding.interface,
        "pciAddress": binding.pci_address,
        "shadow": {
            "namespace": binding.pod_namespace,
            "name": binding.shadow_name,
            "uid": binding.shadow_uid,
        },
        "source": {"namespace": binding.source.namespace, "name": binding.source.name},
    }
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    network = network_data(str(annotations.get(NETWORK_STATUS_ANNOTATION) or "[]"), shadow)
    return DeviceReport(
        DRIVER_NAME,
        binding.identity.pool,
        binding.identity.device,
        data,
        SHADOW_READY,
        f"shadow {shadow} is selected by Pod {binding.pod_namespace}/{binding.pod_name} as "
        f"{binding.interface}",
        network,
    )


def ready_reports(bindings: Sequence[BindingRecord], pod: Mapping[str, Any]) -> list[DeviceReport]:
    return [binding_report(b, pod) for b in bindings if b.phase == READY]


class DeviceStatusWriter:
    """Converges claims' status.devices; a claim whose write failed is left alone by `patient`
    callers (the repair worker) until its backoff expires, so a missing right costs few calls."""

    def __init__(
        self,
        api: ClaimStatusApi,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._api = api
        self._now = now
        self._clock = clock
        self._sleep = sleep
        self._rand = rand
        self._failures: dict[str, int] = {}
        # Claim UID -> no patient write before this time: a backoff after a failure, or a short
        # settle time after a write, whose claim a racing repair pass may have read just before.
        self._quiet_until: dict[str, float] = {}

    def publish(
        self, claim: Mapping[str, Any], reports: Sequence[DeviceReport], *, patient: bool = False
    ) -> bool:
        """Upsert `reports` into the claim's status.devices; True when a write was made."""
        uid = str((claim.get("metadata") or {}).get("uid"))
        if patient and self._clock() < self._quiet_until.get(uid, 0.0):
            return False
        stamp = self._now().strftime("%Y-%m-%dT%H:%M:%SZ")

        def wanted(current: Mapping[str, Any]) -> list[dict[str, Any]]:
            return _merged(current, reports, stamp)

        try:
            written = self._converge(claim, wanted)
        except ReasonedError:
            count = self._failures[uid] = self._failures.get(uid, 0) + 1
            self._quiet_until[uid] = self._clock() + backoff(count)
            raise
        self._failures.pop(uid, None)
        if written:
            self._quiet_until[uid] = self._clock() + SETTLE_AFTER_WRITE
        else:
            self._quiet_until.pop(uid, None)
        return written

    def would_write(self, claim: Mapping[str, Any], reports: Sequence[DeviceReport]) -> bool:
        """Whether a patient publish of `reports` would write `claim` as read (no request)."""
        uid = str((claim.get("metadata") or {}).get("uid"))
        if self._clock() < self._quiet_until.get(uid, 0.0):
            return False
        try:
            return _merged(claim, reports, "") != _devices(claim)
        except ReasonedError:
            return True  # publish reports it

    def withdraw(self, namespace: str, name: str, uid: str, keys: Collection[StatusKey]) -> bool:
        """Remove this driver's entries `keys` from the claim, if it is still claim `uid`."""
        self._failures.pop(uid, None)
        self._quiet_until.pop(uid, None)
        try:
            claim = self._api.get_claim(namespace, name)
        except ReasonedError as exc:
            if exc.reason == CLAIM_NOT_FOUND:
                return False
            raise
        if (claim.get("metadata") or {}).get("uid") != uid:
            return False
        return self._converge(claim, lambda current: remove_device_status(_devices(current), keys))

    def _converge(
        self, claim: Mapping[str, Any], wanted: Callable[[Mapping[str, Any]], list[dict[str, Any]]]
    ) -> bool:
        meta = claim.get("metadata") or {}
        namespace, name, uid = str(meta.get("namespace")), str(meta.get("name")), meta.get("uid")
        attempt = 0
        while True:
            devices = wanted(claim)
            if devices == _devices(claim):
                return False
            version = meta.get("resourceVersion")
            ops: list[dict[str, Any]] = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": version},
                {"op": "add", "path": "/status/devices", "value": devices},
            ]
            try:
                self._api.patch_claim_status(namespace, name, ops)
                return True
            except ApiError as exc:
                attempt += 1
                if exc.status not in RETRYABLE_CONFLICTS or attempt == BACKOFF_STEPS:
                    raise
                failure = exc
            self._sleep(conflict_delay(attempt - 1, self._rand()))
            claim = self._api.get_claim(namespace, name)
            meta = claim.get("metadata") or {}
            if meta.get("uid") != uid:
                return False  # the claim was replaced: these entries belong to no live claim
            if meta.get("resourceVersion") == version:
                raise _explained(failure, namespace, name)  # not a lost race: the entries were refused


def _explained(error: ApiError, namespace: str, name: str) -> ApiError:
    """Kubernetes reports a missing per-driver status right as a field error (422), not a 403."""
    if _FORBIDDEN_FIELD not in error.message:
        return error
    return ApiError(
        DEVICE_STATUS_FORBIDDEN,
        f"the API server refused this driver's status.devices entries of ResourceClaim {namespace}/"
        f"{name}: the driver needs associated-node:patch on resourceclaims/driver (deploy/base/driver-rbac.yaml) "
        "and a ServiceAccount token bound to a Pod on the claim's node, which the DaemonSet's own token "
        "is; networking does not depend on this status",
        status=error.status,
    )


def _merged(claim: Mapping[str, Any], reports: Sequence[DeviceReport], stamp: str) -> list[dict[str, Any]]:
    generation = int((claim.get("metadata") or {}).get("generation") or 0)
    desired = [desired_entry(r, generation=generation, now=stamp) for r in reports]
    return merge_device_status(_devices(claim), desired)


def _devices(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(d) for d in (claim.get("status") or {}).get("devices") or []]
