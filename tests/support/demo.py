"""`make demo` as a newcomer runs it (scripts/demo.py, its own control plane), for the e2e tests
that read its JSON report and exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
# The tools come from the session's tool_dirs fixture and the images are cached by their inputs;
# a cold image build is minutes of it.
DEMO_TIMEOUT = 900


def run_demo(*args: str) -> dict[str, Any]:
    """The demo's JSON report; it must exit 0."""
    out = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "demo.py"), "-o", "json", *args],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr[-6000:]
    report: dict[str, Any] = json.loads(out.stdout)
    return report
