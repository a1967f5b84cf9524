"""Named crash points for restart tests (spec 8.3: every step must survive a kill).

With SRIOV_DRA_CRASH_AT=<step> the agent ends abruptly (no cleanup, no flush), exactly like a
SIGKILL at that point, so a test can restart it and check that state converges. Unset in
production, where each point costs one environment lookup.
"""

from __future__ import annotations

import os
from typing import Final

CRASH_ENV: Final = "SRIOV_DRA_CRASH_AT"
CRASH_EXIT: Final = 137

PREPARE_STEPS: Final = (
    "prepare-host",
    "prepare-pending",
    "prepare-created",
    "prepare-shadow",
    "prepare-pod",
    "prepare-ready",
)
UNPREPARE_STEPS: Final = (
    "unprepare-deleting",
    "unprepare-shadow-deleted",
    "unprepare-withdrawn",
    "unprepare-hardware",
    "unprepare-release-complete",
    "unprepare-finalized",
)


def crash_point(step: str) -> None:
    if os.environ.get(CRASH_ENV) == step:
        os._exit(CRASH_EXIT)
