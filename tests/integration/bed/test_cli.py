"""``scripts/testbed up|status|down`` on a real bed: sourceable output, idempotent up and down,
and nothing left running afterwards."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from testbed.processes import is_running
from testbed.runstate import load
from testbed.tools import REPO_ROOT, ToolSet

pytestmark = pytest.mark.integration

SCRIPT = REPO_ROOT / "scripts" / "testbed"


def run_testbed_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "--root", str(root), *args], capture_output=True, text=True, timeout=300, check=False
    )


def sourced(stdout: str) -> dict[str, str]:
    out = subprocess.run(
        ["bash", "-c", f'{stdout}\nenv -0 | grep -z "^KUBECONFIG=\\|^AUDIT_LOG=\\|^TESTBED_"'],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(item.split("=", 1) for item in out.stdout.split("\0") if item)


def test_up_status_down_lifecycle(tool_dirs: ToolSet, tmp_path: Path) -> None:
    tool_dirs.require("etcd")
    tool_dirs.require("k8s")
    root = tmp_path / "beds"
    try:
        first = run_testbed_cli(root, "up", "--node-name", "cli-node")
        assert first.returncode == 0, first.stderr
        env = sourced(first.stdout)
        assert env["TESTBED_NODE_NAME"] == "cli-node"
        assert Path(env["TESTBED_LOG_DIR"]).is_dir()
        kubeconfig = json.loads(Path(env["KUBECONFIG"]).read_text())
        assert kubeconfig["clusters"][0]["cluster"]["server"] == env["TESTBED_SERVER"]
        assert (
            Path(env["TESTBED_KUBECONFIG_DRIVER"]).is_file() and Path(env["TESTBED_KUBECONFIG_CNI"]).is_file()
        )

        again = run_testbed_cli(root, "up")
        assert again.returncode == 0 and "already up" in again.stderr
        assert sourced(again.stdout)["TESTBED_SERVER"] == env["TESTBED_SERVER"]

        status = run_testbed_cli(root, "status")
        assert status.returncode == 0 and "healthy" in status.stdout

        state = load(Path(env["TESTBED_STATE"]))
        assert {p.name for p in state.processes} == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        }
        assert Path(env["AUDIT_LOG"]).stat().st_size > 0
    finally:
        down = run_testbed_cli(root, "down")
    assert down.returncode == 0, down.stderr
    assert not any(is_running(p.pid, p.start_ticks) for p in state.processes)
    assert not state.run_dir.exists() and not state.etcd_data_dir.exists()
    assert "no test bed running" in run_testbed_cli(root, "down").stderr
    assert run_testbed_cli(root, "status").returncode == 3
