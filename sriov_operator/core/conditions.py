"""One status condition as metav1.Condition, changed only when it really changed.

A pass that finds nothing new must write nothing (no status-update loop): a condition is
rewritten only when its status, reason, message or observedGeneration differ, and
lastTransitionTime moves only when the status does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def find(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def next_condition(
    obj: Mapping[str, Any], kind: str, *, status: str, reason: str, message: str, now: str
) -> dict[str, Any] | None:
    """The condition to write on `obj` (stamped with its current generation), or None when the
    stored one already says exactly this."""
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    old = find((obj.get("status") or {}).get("conditions") or [], kind)
    new = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": now,
    }
    if old is not None:
        if all(old.get(k) == new[k] for k in ("status", "reason", "message", "observedGeneration")):
            return None
        if old.get("status") == status and old.get("lastTransitionTime"):
            new["lastTransitionTime"] = old["lastTransitionTime"]
    return new
