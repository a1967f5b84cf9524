"""The audit reader counts requests exactly, honours marks and never parses a half-written line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.audit import ANY, AuditLog
from testbed.waiting import WaitTimeout


def event(
    user: str, verb: str, resource: str, *, group: str = "", code: int = 200, stage: str = "ResponseComplete"
) -> dict[str, Any]:
    ref: dict[str, Any] = {"resource": resource, "namespace": "ns1", "name": "obj"}
    if group:
        ref["apiGroup"] = group
    return {
        "kind": "Event",
        "auditID": f"{user}-{verb}-{resource}-{stage}",
        "stage": stage,
        "verb": verb,
        "user": {"username": user, "groups": ["system:authenticated"]},
        "objectRef": ref,
        "responseStatus": {"code": code},
        "requestURI": f"/api/v1/{resource}",
    }


def write(path: Path, *events: dict[str, Any], tail: bytes = b"") -> None:
    with path.open("ab") as f:
        for e in events:
            f.write(json.dumps(e).encode() + b"\n")
        f.write(tail)


def test_filters_by_user_verb_resource_and_group(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write(
        log,
        event("cni-shim", "get", "pods"),
        event("cni-shim", "get", "network-attachment-definitions", group="k8s.cni.cncf.io"),
        event(
            "sriov-dra-driver", "create", "network-attachment-definitions", group="k8s.cni.cncf.io", code=403
        ),
        event("cni-shim", "watch", "pods", stage="ResponseStarted"),
    )
    audit = AuditLog(log)
    assert audit.count(user="cni-shim") == 2
    assert [e.resource for e in audit.events(user="cni-shim", group="")] == ["pods"]
    assert audit.count(group="k8s.cni.cncf.io") == 2
    [denied] = audit.events(code=403)
    assert (denied.user, denied.verb, denied.namespace, denied.name) == (
        "sriov-dra-driver",
        "create",
        "ns1",
        "obj",
    )
    assert audit.count(stage=ANY, verb="watch") == 1
    assert audit.count(verb="watch") == 0


def test_mark_reads_only_later_events_and_skips_a_partial_line(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    audit = AuditLog(log)
    assert audit.mark() == 0 and audit.events() == []
    write(log, event("a", "get", "pods"))
    mark = audit.mark()
    partial = json.dumps(event("b", "get", "pods")).encode()
    write(log, event("b", "list", "pods"), tail=partial[:20])
    assert [e.user for e in audit.events(since=mark)] == ["b"]
    assert audit.mark() < log.stat().st_size
    with log.open("ab") as f:
        f.write(partial[20:] + b"\n")
    assert [e.verb for e in audit.events(since=mark)] == ["list", "get"]


def test_unknown_filter_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="username"):
        AuditLog(tmp_path / "audit.log").events(username="x")


def test_wait_for_count_times_out_with_the_filter_named(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    write(log, event("a", "get", "pods"))
    assert len(AuditLog(log).wait_for_count(1, user="a", timeout=1.0)) == 1
    with pytest.raises(WaitTimeout, match="'user': 'nobody'"):
        AuditLog(log).wait_for_count(1, user="nobody", timeout=0.3)
