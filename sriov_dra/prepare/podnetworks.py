"""Publishing and withdrawing managed selections on the live Pod (spec 8.1 step 4: merge ours, keep
other writers' entries; 8.4 step 3: remove only this claim's entries).

Each write is one JSON Patch guarded by `test` ops on the Pod's UID and resourceVersion, computed
from a fresh read. A 409 or 422 means the Pod changed underneath: re-read, re-verify, recompute,
within a bounded number of attempts. No response at all is resolved the same way, by re-reading.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.apierrors import ApiError
from sriov_dra.core.selection import (
    ManagedBinding,
    PatchOp,
    merge_managed_selections,
    release_claim_selections,
)
from sriov_dra.ports import PodClient

POD_PATCH_ATTEMPTS: Final = 6


class PodNetworksError(ReasonedError):
    """The Pod's managed selections could not be written."""


def _patch_until_stable(
    pods: PodClient,
    namespace: str,
    name: str,
    compute: Callable[[Mapping[str, Any] | None], list[PatchOp] | None],
    *,
    attempts: int,
    sleep: Callable[[float], None],
    what: str,
) -> None:
    """Read, compute, patch; None from `compute` means nothing (more) to write."""
    for attempt in range(attempts):
        ops = compute(pods.get_pod(namespace, name))
        if ops is None:
            return
        try:
            pods.patch_pod(namespace, name, ops)
            return
        except ApiError as exc:
            if not exc.retryable:
                raise
        sleep(min(0.02 * 2**attempt, 0.5))
    raise PodNetworksError(
        reasons.POD_PATCH_RETRIES_EXHAUSTED,
        f"{what} on Pod {namespace}/{name} kept conflicting after {attempts} attempts (the Pod changes "
        "too often); kubelet retries",
        pod=f"{namespace}/{name}",
    )


def publish_selections(
    pods: PodClient,
    namespace: str,
    name: str,
    verify: Callable[[Mapping[str, Any]], None],
    desired: Sequence[ManagedBinding],
    *,
    attempts: int = POD_PATCH_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Ensure every desired binding is selected and registered on the verified live Pod."""

    def compute(pod: Mapping[str, Any] | None) -> list[PatchOp] | None:
        if pod is None:
            raise PodNetworksError(
                reasons.POD_NOT_FOUND,
                f"Pod {namespace}/{name} disappeared before its networks were published",
            )
        verify(pod)
        return merge_managed_selections(pod, desired)

    _patch_until_stable(
        pods, namespace, name, compute, attempts=attempts, sleep=sleep, what="publishing managed networks"
    )


def withdraw_claim_selections(
    pods: PodClient,
    namespace: str,
    name: str,
    pod_uid: str,
    claim_uid: str,
    *,
    attempts: int = POD_PATCH_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Drop only this claim's owned entries from the same Pod UID; a gone or replaced Pod is a no-op."""

    def compute(pod: Mapping[str, Any] | None) -> list[PatchOp] | None:
        if pod is None or (pod.get("metadata") or {}).get("uid") != pod_uid:
            return None
        return release_claim_selections(pod, claim_uid)

    _patch_until_stable(
        pods, namespace, name, compute, attempts=attempts, sleep=sleep, what="withdrawing managed networks"
    )
