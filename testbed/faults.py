"""The faults the fault proxy (testbed/faultproxy.py) injects into the bed's API traffic, and which
requests they go into: a ``Fault`` (a status the apiserver could answer, a timeout, a response
lost after the apiserver acted, a reset, a delay), the request's API target and verb as the
apiserver would see them, and a ``Rule`` that counts matching requests and says which one gets its
fault. Pure: nothing here opens a socket."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

FaultKind = Literal["status", "timeout", "response-lost", "reset", "delay"]

# Kubernetes' own reason for each status code a fault test is likely to want.
STATUS_REASONS: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
# Long enough for any client timeout a test sets; the proxy releases held requests when it stops.
DEFAULT_HOLD_S = 120.0


@dataclass(frozen=True)
class Fault:
    """What to do instead of (or after) forwarding; build one with the functions below."""

    kind: FaultKind
    status: int = 0
    reason: str = ""
    message: str = ""
    retry_after: int | None = None
    seconds: float = 0.0

    def describe(self) -> str:
        return f"{self.kind} {self.status}" if self.kind == "status" else self.kind


def status(
    code: int, reason: str | None = None, message: str | None = None, *, retry_after: int | None = None
) -> Fault:
    """Answer with a Kubernetes Status object (and ``Retry-After`` when given) without forwarding."""
    reason = reason or STATUS_REASONS.get(code, "InternalError")
    return Fault(
        "status",
        status=code,
        reason=reason,
        message=message or f"injected by the test fault proxy: {reason}",
        retry_after=retry_after,
    )


def forbidden() -> Fault:
    return status(403)


def not_found() -> Fault:
    return status(404)


def conflict(reason: str = "Conflict") -> Fault:
    """409; pass ``reason="AlreadyExists"`` for the create-collision flavour."""
    return status(409, reason)


def invalid() -> Fault:
    return status(422)


def internal_error() -> Fault:
    return status(500)


def too_many_requests(retry_after: int = 1) -> Fault:
    return status(429, retry_after=retry_after)


def timeout(hold: float = DEFAULT_HOLD_S) -> Fault:
    """Never answer: hold the connection (not forwarded) until the client gives up or ``hold`` ends."""
    return Fault("timeout", seconds=hold)


def response_lost() -> Fault:
    """Forward the request so the apiserver acts on it, then drop the connection unanswered."""
    return Fault("response-lost")


def reset() -> Fault:
    """Abort the connection with a TCP reset before forwarding anything."""
    return Fault("reset")


def delay(seconds: float) -> Fault:
    """Forward normally, but only after ``seconds`` (to widen a race window on purpose)."""
    return Fault("delay", seconds=seconds)


@dataclass(frozen=True)
class ApiTarget:
    """What a request path addresses, parsed the way the apiserver's request-info does."""

    group: str
    version: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


# A namespace's own subresources; anything else after /namespaces/<ns>/ is a namespaced resource.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


def parse_target(path: str) -> ApiTarget | None:
    """The resource a ``/api`` or ``/apis`` path names; None for discovery and non-resource URLs."""
    parts = [p for p in urlsplit(path).path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 2 and (len(rest) == 2 or rest[2] in _NAMESPACE_SUBRESOURCES):
        return ApiTarget(group, version, "namespaces", None, rest[1], rest[2] if len(rest) > 2 else None)
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    return ApiTarget(
        group,
        version,
        rest[0],
        namespace,
        rest[1] if len(rest) > 1 else None,
        "/".join(rest[2:]) or None,
    )


def is_watch(path: str) -> bool:
    return parse_qs(urlsplit(path).query).get("watch", [""])[0] in ("true", "1")


def verb_of(method: str, path: str) -> str:
    """The Kubernetes verb (get, list, watch, create, update, patch, delete, deletecollection)."""
    target = parse_target(path)
    named = target is not None and target.name is not None
    if method in ("GET", "HEAD"):
        return "watch" if is_watch(path) else ("get" if named else "list")
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if named else "deletecollection",
    }.get(method, method.lower())


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    verb: str
    target: ApiTarget | None
    status: int | None
    """What the client got (None: the connection was dropped), or the apiserver's answer for response-lost."""
    fault: str | None
    """``Fault.describe()`` of the injected fault, None when the request passed through untouched."""
    body: bytes = b""


@dataclass(eq=False)
class Rule:
    """Inject ``fault`` into matching requests: skip the first ``after``, then fire ``times`` times."""

    fault: Fault
    method: str | None = None
    path: re.Pattern[str] | None = None
    verb: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    after: int = 0
    times: int | None = None
    """None: every matching request once ``after`` have passed."""
    seen: int = 0
    fired: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method != method:
            return False
        if self.path is not None and not self.path.search(path):
            return False
        if self.verb is not None and self.verb != verb_of(method, path):
            return False
        wanted = {
            "resource": self.resource,
            "namespace": self.namespace,
            "name": self.name,
            "subresource": self.subresource,
        }
        if all(v is None for v in wanted.values()):
            return True
        target = parse_target(path)
        return target is not None and all(v is None or getattr(target, k) == v for k, v in wanted.items())

    def offer(self, method: str, path: str, *, taken: bool = False) -> bool:
        """Count a request if this rule matches it; True when this rule's fault goes into it.

        ``taken``: an earlier rule already fires on this request (it still counts here).
        """
        if not self.matches(method, path):
            return False
        self.seen += 1
        if taken or self.seen <= self.after or self.exhausted:
            return False
        self.fired += 1
        return True

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times


def faults_summary(requests: Iterable[RecordedRequest]) -> list[str]:
    """One line per request, for assertion messages."""
    return [f"{r.method} {r.path} -> {r.status} {r.fault or ''}".rstrip() for r in requests]
