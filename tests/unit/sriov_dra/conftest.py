from pathlib import Path

import pytest

from tests.fakes.driver_env import Env


@pytest.fixture
def env(tmp_path: Path) -> Env:
    """A managed node agent over the in-memory API, with source NAD rail-a."""
    e = Env(tmp_path)
    e.source_nad()
    return e
