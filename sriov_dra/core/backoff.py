"""Retry timing: a jittered interval and capped exponential backoff (pure arithmetic)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    pass


BACKOFF_BASE: Final = 1.0


BACKOFF_MAX: Final = 300.0


def jittered(interval: float, fraction: float, r: float) -> float:
    """`interval` spread uniformly over ±fraction for r in [0, 1), so nodes do not pass in lockstep."""
    return interval * (1.0 + fraction * (2.0 * r - 1.0))


def backoff(failures: int, base: float = BACKOFF_BASE, cap: float = BACKOFF_MAX) -> float:
    """Delay before the next attempt after `failures` consecutive failures (failures >= 1)."""
    return float(min(cap, base * 2 ** min(failures - 1, 30)))
