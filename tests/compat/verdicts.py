"""Per-test verdicts of the differential suite, kept on the pytest config for the closing line."""

from __future__ import annotations

import pytest

OUTCOMES = pytest.StashKey[dict[str, str]]()


def record(config: pytest.Config, node_id: str, verdict: str) -> None:
    """``verdict`` is same, deliberate or different; the terminal summary counts them."""
    config.stash.setdefault(OUTCOMES, {})[node_id] = verdict
