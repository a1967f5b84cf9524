"""Polling with a deadline on a real condition: the only way tests here wait for anything."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from sriov_contract.errors import ReasonedError

T = TypeVar("T")


class WaitTimeout(ReasonedError):
    """A condition did not become true before its deadline."""


def wait_for(
    condition: Callable[[], T | None],
    timeout: float,
    *,
    what: str,
    interval: float = 0.1,
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``condition`` until it returns something truthy and return that value.

    Exceptions listed in ``ignore`` count as "not yet" (e.g. a 404 before an object appears); the
    last one is included in the timeout message.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except ignore as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f"; last error: {last_error!r}" if last_error else ""
            raise WaitTimeout("WaitTimeout", f"timed out after {timeout:.1f}s waiting for {what}{detail}")
        time.sleep(interval)
