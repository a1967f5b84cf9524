"""Condition transitions, reported: a status condition written only when it changed, and one core/v1
Event per transition, naming the object and the fix."""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from sriov_operator.core.conditions import next_condition
from sriov_operator.core.keys import API_VERSION
from sriov_operator.ports import StatusSink
from sriov_operator.reasons import OperatorError

log = logging.getLogger(__name__)
REPORTER = "sriov-network-operator"


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def emit(
    sink: Callable[[str, Mapping[str, Any]], None], obj: Mapping[str, Any], condition: Mapping[str, Any]
) -> None:
    """A Normal event for a True condition, a Warning otherwise. Best effort: a lost Event must not
    fail the pass that already wrote the condition."""
    md = obj.get("metadata") or {}
    stamp = now()
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{md.get('name')}.{secrets.token_hex(8)}", "namespace": md.get("namespace")},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
        },
        "type": "Normal" if condition["status"] == "True" else "Warning",
        "reason": condition["reason"],
        "message": condition["message"][:1024],
        "source": {"component": REPORTER},
        "reportingComponent": REPORTER,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    try:
        sink(str(md.get("namespace")), body)
    except OperatorError as exc:
        log.warning("event for %s/%s not recorded: %s", md.get("namespace"), md.get("name"), exc)


def report(
    sink: StatusSink,
    plural: str,
    kind: str,
    obj: Mapping[str, Any],
    *,
    condition_type: str,
    verdict: tuple[str, str, str],
) -> bool:
    """Write `verdict` (status, reason, message) as `condition_type` on `obj` when it changed, with
    one Event per transition; False when the status write failed (the pass is retried)."""
    status, reason, message = verdict
    condition = next_condition(obj, condition_type, status=status, reason=reason, message=message, now=now())
    if condition is None:
        return True
    md = obj.get("metadata") or {}
    try:
        sink.apply_condition(plural, str(md.get("namespace")), str(md.get("name")), condition)
    except OperatorError as exc:
        log.warning("%s", exc)
        return False
    emit(sink.create_event, {"apiVersion": API_VERSION, "kind": kind, **obj}, condition)
    return True
