"""Fixtures for suites that run on the end-to-end stack (testbed/stack.py): fake node, driver,
node CNI and the real kubelet (containerd + runc) on the session's bed.

- ``stacks`` (module): at most one running ``Stack``, switched between thick and thin (and real and
  simulated kubelet) on demand.
- ``two_node_stack``: a thick stack with a second real node (``Stack(second_node=True)``).
- ``thick_stack``: that stack with the CNI in thick mode on the real kubelet. Where the real kubelet
  cannot run here the test is skipped with the exact reason (``realnode.unavailable_reason``),
  never passed on the simulator.

Heavy imports happen inside the fixtures so that unit-only runs stay fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from testbed.tools import ToolSet

if TYPE_CHECKING:
    from testbed.bed import TestBed
    from testbed.stack import Stack, Stacks


@pytest.fixture(scope="module")
def stacks(testbed: TestBed, tool_dirs: ToolSet) -> Iterator[Stacks]:
    from testbed.stack import Stacks  # noqa: PLC0415 - see module docstring

    made = Stacks(testbed, tool_dirs)
    yield made
    made.close()


@pytest.fixture(scope="session")
def real_kubelet(tool_dirs: ToolSet) -> None:
    """Skips the test, naming the reason, where the real kubelet cannot run."""
    from testbed import realnode  # noqa: PLC0415 - see module docstring

    reason = realnode.unavailable_reason(tool_dirs)
    if reason:
        pytest.skip(f"the real kubelet cannot run here: {reason}")


@pytest.fixture
def thick_stack(stacks: Stacks, real_kubelet: None) -> Stack:
    return stacks.get(thick=True)


@pytest.fixture
def two_node_stack(stacks: Stacks, real_kubelet: None) -> Stack:
    return stacks.get(thick=True, second_node=True)
