"""What still blocks removing the driver (spec 18.1: drain and release first, verify that no managed
checkpoint record or owned protection finalizer remains, only then uninstall).

Pure: the caller lists NetworkAttachmentDefinitions and ResourceClaims cluster-wide and reads a
node's checkpoint; this says which of them would be stranded. A blocker is never removed here:
the driver that is still installed releases each one as its workload goes (no finalizer is
stripped without release evidence).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE, PROTECTION_FINALIZER
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.core.shadowspec import finalizers_of
from sriov_dra.model import DRIVER_NAME

SHADOW = "shadow"
FINALIZER = "finalizer"
CLAIM = "claim"
CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class Blocker:
    """One object or record that removing the driver now would strand."""

    kind: str  # SHADOW, FINALIZER, CLAIM or CHECKPOINT
    namespace: str
    name: str
    uid: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
            "why": self.why,
        }


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = _meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or "")


def nad_blockers(nads: Iterable[Mapping[str, Any]]) -> list[Blocker]:
    """Our managed shadows, and any NAD that carries our protection finalizer: a shadow whose labels
    were overwritten still waits for the driver to release it."""
    out = []
    for nad in nads:
        labels = _meta(nad).get("labels") or {}
        managed = isinstance(labels, Mapping) and labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
        protected = PROTECTION_FINALIZER in finalizers_of(nad)
        deleting = (
            " (deleting: waits for the driver's release)" if _meta(nad).get("deletionTimestamp") else ""
        )
        if managed:
            why = "managed shadow" + (f" with {PROTECTION_FINALIZER}" if protected else "")
            out.append(Blocker(SHADOW, *_identity(nad), why + deleting))
        elif protected:
            out.append(Blocker(FINALIZER, *_identity(nad), f"carries {PROTECTION_FINALIZER}{deleting}"))
    return out


def _our_results(claim: Mapping[str, Any]) -> int:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return sum(1 for r in results if isinstance(r, Mapping) and r.get("driver") == DRIVER_NAME)


def claim_blockers(claims: Iterable[Mapping[str, Any]]) -> list[Blocker]:
    """ResourceClaims allocated devices of our driver: kubelet needs the driver to unprepare them."""
    out = []
    for claim in claims:
        devices = _our_results(claim)
        if devices:
            reserved = len((claim.get("status") or {}).get("reservedFor") or [])
            why = f"{devices} device(s) of {DRIVER_NAME} allocated, reserved for {reserved} consumer(s)"
            out.append(Blocker(CLAIM, *_identity(claim), why))
    return out


def checkpoint_blockers(records: Iterable[ClaimRecord]) -> list[Blocker]:
    """The node's prepared claims: kubelet has not unprepared them yet."""
    return [
        Blocker(CHECKPOINT, r.namespace, r.name, r.claim_uid, f"prepared for Pod {r.pod_uid} on this node")
        for r in records
    ]


def summary(blockers: list[Blocker]) -> str:
    """One line: how many of each kind, in a fixed order."""
    counts = [
        (kind, sum(1 for b in blockers if b.kind == kind)) for kind in (SHADOW, FINALIZER, CLAIM, CHECKPOINT)
    ]
    return ", ".join(f"{n} {kind}(s)" for kind, n in counts if n)
