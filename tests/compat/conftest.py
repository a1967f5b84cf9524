"""Session wiring of the differential suite: one World (bed, bin dir, netns, daemon pair), the
``compat_full`` marker (excluded unless COMPAT_FULL=1, as `make compat` sets) and the closing
``compat: N cases, N same, N deliberate, N different`` line."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.compat.cases import BY_ID
from tests.compat.model import Case
from tests.compat.verdicts import OUTCOMES


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "compat_full: slow differential cases (daemon starts, deliberate waits); `make compat` runs them",
    )
    config.stash.setdefault(OUTCOMES, {})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("COMPAT_FULL") == "1":
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        (drop if item.get_closest_marker("compat_full") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    outcomes = config.stash.get(OUTCOMES, {})
    if not outcomes:
        return
    verdicts = list(outcomes.values())
    terminalreporter.write_line(
        f"compat: {len(verdicts)} cases, {verdicts.count('same')} same, "
        f"{verdicts.count('deliberate')} deliberate, {verdicts.count('different')} different"
    )


# Module scope: the cases' Pods are bound to the bed's node, so they must be gone before a later
# suite runs a kubelet (simulated or real) there, which would start sandboxes for them.
@pytest.fixture(scope="module")
def compat_world(
    request: pytest.FixtureRequest, testbed: Any, tool_dirs: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    from tests.compat.harness import World  # noqa: PLC0415 - the Kubernetes client stays out of unit runs

    selected: list[Case] = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "case_id" in callspec.params:
            selected.append(BY_ID[callspec.params["case_id"]])
    with ExitStack() as stack:
        world = World(testbed, tool_dirs, Path(tmp_path_factory.mktemp("compat")), stack)
        world.prepare(list({c.id: c for c in selected}.values()))
        yield world
