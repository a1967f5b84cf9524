"""Per-claim and per-Pod operation locks with one acquisition order: claim, then Pod.

Prepare and release of the same claim UID, and every operation touching one Pod's shared
annotations, are serialized here. The checkpoint has its own short lock and is never held across
API or hardware work. A thread that tries to take a second claim lock, a claim lock after a Pod
lock, or a lock it already holds gets an error instead of a deadlock: helpers must run under the
locks their entry point took.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class LockOrderError(RuntimeError):
    """A programming error: locks were requested out of order or re-entered."""


class _KeyedLocks:
    """One mutex per key, created on first use and dropped when nobody holds or awaits it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def size(self) -> int:
        with self._guard:
            return len(self._locks)


class OperationLocks:
    """The claim and Pod operation locks of one node agent."""

    def __init__(self) -> None:
        self._claims = _KeyedLocks("claim")
        self._pods = _KeyedLocks("Pod")
        self._held = threading.local()

    @contextmanager
    def claim_then_pod(self, claim_uid: str, pod_uid: str) -> Iterator[None]:
        """Hold both locks for one claim operation; taken once, at the operation's boundary."""
        if getattr(self._held, "active", False):
            raise LockOrderError(
                f"claim {claim_uid}: this thread already holds operation locks; helpers must not re-acquire"
            )
        self._held.active = True
        try:
            with self._claims.hold(claim_uid), self._pods.hold(pod_uid):
                yield
        finally:
            self._held.active = False

    def idle(self) -> bool:
        """True when no lock is held or awaited (their bookkeeping does not grow without bound)."""
        return self._claims.size() == 0 and self._pods.size() == 0
