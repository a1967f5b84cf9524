"""Fixtures for suites that run on the end-to-end stack (tests/bed/e2e.py): fake node, driver,
node CNI and simulated kubelet on the session's bed.

- ``stacks`` (module): at most one running ``Stack``, switched between thick and thin on demand.
- ``thick_stack``: that stack with the CNI in thick mode (the thin mode runs through `make demo`'s
  own entry point in tests/e2e).

Heavy imports happen inside the fixtures so that unit-only runs stay fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.bed.tools import ToolSet

if TYPE_CHECKING:
    from tests.bed.bed import TestBed
    from tests.bed.e2e import Stack, Stacks


@pytest.fixture(scope="module")
def stacks(testbed: TestBed, tool_dirs: ToolSet) -> Iterator[Stacks]:
    from tests.bed.e2e import Stacks  # noqa: PLC0415 - see module docstring

    made = Stacks(testbed, tool_dirs)
    yield made
    made.close()


@pytest.fixture
def thick_stack(stacks: Stacks) -> Stack:
    return stacks.get(thick=True)
