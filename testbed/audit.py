"""Read the apiserver's JSON-lines audit log to count what a component really asked for.

The bed's policy logs every request at Metadata level and omits the RequestReceived stage, so a
finished request is exactly one ``ResponseComplete`` event (watches also log ``ResponseStarted``).
The apiserver writes an event as the request finishes, possibly just after the client saw the
response: poll (``wait_for_count``) rather than read once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.waiting import wait_for

ANY: Any = object()

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
"""


@dataclass(frozen=True)
class AuditEvent:
    user: str
    groups: tuple[str, ...]
    verb: str
    resource: str
    group: str
    namespace: str
    name: str
    subresource: str
    code: int
    stage: str
    uri: str
    user_agent: str
    audit_id: str
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AuditEvent:
        user = data.get("user") or {}
        ref = data.get("objectRef") or {}
        status = data.get("responseStatus") or {}
        return cls(
            user=str(user.get("username", "")),
            groups=tuple(user.get("groups") or ()),
            verb=str(data.get("verb", "")),
            resource=str(ref.get("resource", "")),
            group=str(ref.get("apiGroup", "")),
            namespace=str(ref.get("namespace", "")),
            name=str(ref.get("name", "")),
            subresource=str(ref.get("subresource", "")),
            code=int(status.get("code", 0)),
            stage=str(data.get("stage", "")),
            uri=str(data.get("requestURI", "")),
            user_agent=str(data.get("userAgent", "")),
            audit_id=str(data.get("auditID", "")),
            raw=data,
        )


def parse_lines(chunk: bytes) -> Iterator[AuditEvent]:
    for line in chunk.splitlines():
        if line.strip():
            yield AuditEvent.from_json(json.loads(line))


def matches(event: AuditEvent, filters: dict[str, Any]) -> bool:
    return all(value is ANY or getattr(event, key) == value for key, value in filters.items())


class AuditLog:
    """``AuditLog(path).events(user="cni-shim", verb="get", since=mark)``.

    Filters compare for equality with the ``AuditEvent`` field of the same name; the core API
    group is ``group=""``. ``stage`` defaults to ``ResponseComplete`` (one event per request);
    pass ``stage=ANY`` to see every stage.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def mark(self) -> int:
        """A position after every complete event written so far; pass it as ``since``."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return 0
        return data.rfind(b"\n") + 1

    def _read(self, since: int) -> bytes:
        try:
            with self.path.open("rb") as f:
                f.seek(since)
                data = f.read()
        except FileNotFoundError:
            return b""
        # A line still being written has no newline yet; it belongs to the next read.
        return data[: data.rfind(b"\n") + 1]

    def events(self, *, since: int = 0, stage: Any = "ResponseComplete", **filters: Any) -> list[AuditEvent]:
        unknown = set(filters) - set(AuditEvent.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown audit filter(s) {sorted(unknown)}; use AuditEvent field names")
        wanted = {"stage": stage, **filters}
        return [e for e in parse_lines(self._read(since)) if matches(e, wanted)]

    def count(self, *, since: int = 0, **filters: Any) -> int:
        return len(self.events(since=since, **filters))

    def wait_for_count(
        self, expected: int, *, since: int = 0, timeout: float = 10.0, **filters: Any
    ) -> list[AuditEvent]:
        """Wait until at least ``expected`` matching events exist; return them all."""
        return wait_for(
            lambda: evs if len(evs := self.events(since=since, **filters)) >= expected else None,
            timeout,
            what=f"{expected} audit event(s) matching {filters} in {self.path}",
        )
