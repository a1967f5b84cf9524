"""Retry timing: the jittered repair interval and the capped exponential backoff."""

from __future__ import annotations

import pytest

from sriov_dra.core.backoff import BACKOFF_BASE, BACKOFF_MAX, backoff, jittered


def test_jitter_and_backoff_are_bounded() -> None:
    assert jittered(30, 0.2, 0.0) == pytest.approx(24) and jittered(30, 0.2, 0.999999) == pytest.approx(
        36, abs=1e-3
    )
    assert [backoff(n) for n in (1, 2, 3)] == [1, 2, 4] and backoff(100) == 300


@pytest.mark.parametrize(("r", "expected"), [(0.0, 90.0), (0.25, 95.0), (0.5, 100.0), (0.75, 105.0)])
def test_jitter_spreads_the_interval_linearly(r: float, expected: float) -> None:
    assert jittered(100, 0.1, r) == pytest.approx(expected)


def test_no_jitter_keeps_the_interval() -> None:
    assert jittered(30, 0.0, 0.9) == 30


def test_backoff_doubles_from_the_base_up_to_the_cap() -> None:
    assert (BACKOFF_BASE, BACKOFF_MAX) == (1.0, 300.0)
    assert [backoff(n, base=0.5, cap=10) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10]
    assert backoff(9) == 256.0 and backoff(10) == 300.0


def test_the_exponent_stops_growing_so_huge_counts_stay_finite() -> None:
    assert backoff(10**9, cap=float("inf")) == 2.0**30
    assert backoff(31, cap=float("inf")) == backoff(32, cap=float("inf")) == 2.0**30
    assert isinstance(backoff(1), float)
