"""Fixtures for the real Kubernetes test bed (etcd, kube-apiserver, controller-manager, scheduler).

- ``tool_dirs`` (session): Go-built tool directories; ``tool_dirs.require("plugins")`` skips the
  test, naming the reason, when that tool is not built.
- ``testbed`` (session): a running bed (see ``testbed.bed.TestBed``). Started once per session,
  or attached to the bed named by ``$TESTBED_STATE`` (``eval "$(scripts/testbed up)"``). Logs are
  kept, and their path printed, when any test of the session failed.
- ``k8s_namespace`` (function): a fresh namespace with its ``default`` ServiceAccount, deleted after.
  Deletion finishes asynchronously: the namespace controller waits a fixed 5 s before emptying a
  namespace, so objects of a previous test can still be listed cluster-wide for a few seconds.
  Tests that assert on cluster-wide state mark themselves ``@pytest.mark.k8s_namespace_gone`` (the
  teardown then waits until the namespace is gone) or filter by their own namespace.

Heavy imports (the Kubernetes client) happen inside the fixtures so that unit-only runs stay fast.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from testbed.tools import ToolSet, ToolUnavailable

if TYPE_CHECKING:
    from testbed.bed import TestBed


def _skip_missing(err: ToolUnavailable) -> NoReturn:
    pytest.skip(f"{err.reason}: {err.message}")


@pytest.fixture(scope="session")
def tool_dirs() -> ToolSet:
    return ToolSet(on_missing=_skip_missing)


def _report(config: pytest.Config, line: str) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


@pytest.fixture(scope="session")
def testbed(request: pytest.FixtureRequest, tool_dirs: ToolSet) -> Iterator[TestBed]:
    from testbed import controlplane  # noqa: PLC0415 - see module docstring
    from testbed.bed import TestBed  # noqa: PLC0415 - see module docstring

    attach_to = os.environ.get("TESTBED_STATE")
    if attach_to:
        bed = TestBed.attach(Path(attach_to), tool_dirs)
        if not bed.healthy():
            pytest.fail(
                f"TESTBED_STATE={attach_to} names a test bed that is not healthy; run "
                "'scripts/testbed status', or unset TESTBED_STATE to start a fresh one",
                pytrace=False,
            )
        yield bed
        return
    try:
        bed = controlplane.start(tools=tool_dirs, run_id=controlplane.new_run_id("pytest"))
    except controlplane.BedStartError as exc:
        pytest.fail(f"{exc.reason}: {exc.message}", pytrace=False)
    yield bed
    failed = request.session.testsfailed > 0
    bed.stop(keep_logs=failed)
    if failed:
        _report(request.config, f"test bed logs kept (a test failed): {bed.log_dir}")


NAMESPACE_DELETION_TIMEOUT = 60.0


def _namespace_name(test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"{stem or 't'}-{secrets.token_hex(3)}"


@pytest.fixture
def k8s_namespace(request: pytest.FixtureRequest, testbed: TestBed) -> Iterator[str]:
    from kubernetes import client  # noqa: PLC0415 - see module docstring
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415 - see module docstring

    from testbed.waiting import wait_for  # noqa: PLC0415 - see module docstring

    core = client.CoreV1Api(testbed.api_client)
    from testbed.cni_objects import release_by_hand  # noqa: PLC0415 - see module docstring

    name = testbed.create_namespace(_namespace_name(request.node.name))
    yield name
    release_by_hand(testbed.api_client, name, delete=True)  # now: the namespace goes later
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
    if request.node.get_closest_marker("k8s_namespace_gone"):

        def gone() -> bool:
            try:
                core.read_namespace(name)
            except ApiException as exc:
                return bool(exc.status == 404)
            return False

        wait_for(gone, NAMESPACE_DELETION_TIMEOUT, what=f"namespace {name} to be deleted", interval=0.25)
