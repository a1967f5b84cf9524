"""Tool status comes from build stamps with an exact reason; the CLI is idempotent without a bed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest

from testbed import controlplane
from testbed.tools import COMPONENTS, REPO_ROOT, ToolSet, ToolUnavailable, parse_print_dir, status_of


def test_print_dir_output_is_parsed() -> None:
    assert parse_print_dir("k8s=/c/k8s-v1\netcd=/c/etcd-v3\n\n") == {
        "k8s": Path("/c/k8s-v1"),
        "etcd": Path("/c/etcd-v3"),
    }


def test_status_reasons(tmp_path: Path) -> None:
    assert not status_of("multus", tmp_path).usable
    assert "run 'make tools'" in status_of("multus", tmp_path).reason
    (tmp_path / ".failed").write_text("go build multus-shim: undefined: foo\n")
    failed = status_of("multus", tmp_path)
    assert not failed.usable and "undefined: foo" in failed.reason
    (tmp_path / ".complete").touch()
    assert status_of("multus", tmp_path).usable


def test_missing_tool_goes_to_the_callers_handler(tmp_path: Path) -> None:
    seen: list[ToolUnavailable] = []

    def record(err: ToolUnavailable) -> NoReturn:
        seen.append(err)
        raise RuntimeError("handled")

    tools = ToolSet(on_missing=record)
    tools.__dict__["directories"] = {"plugins": tmp_path}
    with pytest.raises(RuntimeError, match="handled"):
        tools.require("plugins")
    assert seen[0].reason == "ToolNotBuilt"
    with pytest.raises(ToolUnavailable, match="UnknownTool"):
        tools.require("kubelet")


def test_build_tools_prints_every_component_dir() -> None:
    dirs = ToolSet().directories
    # the node's components too: a real kubelet's tools skip with their own reasons
    assert set(dirs) == set(COMPONENTS) and {"kubelet", "containerd", "runc", "pause", "crictl"} <= set(dirs)
    assert all(d.is_absolute() for d in dirs.values())


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testbed", "--root", str(root), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_down_and_status_without_a_bed(tmp_path: Path) -> None:
    status = run_cli(tmp_path, "status")
    assert status.returncode == 3 and "not running" in status.stdout
    for _ in range(2):
        down = run_cli(tmp_path, "down")
        assert down.returncode == 0 and "no test bed running" in down.stderr


def test_bed_start_without_built_tools_names_the_tool_and_starts_nothing(tmp_path: Path) -> None:
    tools = ToolSet()
    tools.__dict__["directories"] = {"etcd": tmp_path / "etcd", "k8s": tmp_path / "k8s"}
    with pytest.raises(ToolUnavailable) as err:
        controlplane.start(tools=tools, run_id="never", root=tmp_path / "runs")
    assert err.value.reason == "ToolNotBuilt" and "etcd is not built" in err.value.message
    assert not (tmp_path / "runs").exists()
