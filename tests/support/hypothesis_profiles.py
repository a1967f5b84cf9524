"""Hypothesis profiles, chosen by ``$HYPOTHESIS_PROFILE``.

- ``default``: what ``make test`` runs; modest, because two cores are shared by every suite.
- ``fuzz``: what ``make fuzz`` runs (``HYPOTHESIS_PROFILE=fuzz pytest tests -k fuzz``); 10,000
  examples per property, so every hostile-input surface sees at least that many.

Neither profile has a per-example deadline: a loaded shared machine must not turn a slow example
into a failure, and the fuzz tests assert "no hang" with their own bounds where it matters.
Tests that pin ``max_examples`` in their own ``@settings`` keep it under either profile.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

FUZZ_EXAMPLES = 10_000

_QUIET = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)

settings.register_profile("default", max_examples=100, deadline=None, suppress_health_check=_QUIET)
settings.register_profile(
    "fuzz", max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=_QUIET, print_blob=True
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
