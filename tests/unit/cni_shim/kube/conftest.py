from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest


@pytest.fixture(scope="module")
def pool() -> Iterator[ThreadPoolExecutor]:
    """The daemon's NAD reader pool, as big as cni_shim.app.thick.NAD_READERS."""
    with ThreadPoolExecutor(4) as executor:
        yield executor
