"""`sriov-dra preflight` on the real API server: the deployed daemon-config, the real shim's
identity answer, plugin binaries and cache directories on disk, CRDs by discovery, and every
driver right by SelfSubjectAccessReview under the shipped RBAC and under an unprivileged user."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sriov_dra.cli.preflight import DRIVER_RIGHTS
from testbed.deployment import BASE_DIR
from testbed.managed_driver import IDENTITY

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


@pytest.fixture
def node_files(tmp_path: Path, tool_dirs) -> dict[str, Path]:
    """A node's CNI files: the deployed daemon-config (cache dir redirected), the shim and host-local."""
    (config_map,) = yaml.safe_load_all((BASE_DIR / "cni-daemon-config.yaml").read_text())
    config = json.loads(config_map["data"]["daemon-config.json"])
    config["cniDir"] = str(tmp_path / "multus-cache")
    (tmp_path / "multus-cache").mkdir()
    (tmp_path / "sriov-cache").mkdir()
    (tmp_path / "plugins").mkdir()
    (tmp_path / "daemon-config.json").write_text(json.dumps(config))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cni-shim").symlink_to(BIN / "cni-shim")
    (bin_dir / "host-local").symlink_to(tool_dirs.require("plugins") / "host-local")
    return {"root": tmp_path, "config": tmp_path / "daemon-config.json", "bin": bin_dir}


def preflight(files: dict[str, Path], kubeconfig: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    root = files["root"]
    return subprocess.run(
        [
            str(BIN / "sriov-dra"),
            "preflight",
            "--kubeconfig",
            str(kubeconfig),
            "--cni-daemon-config",
            str(files["config"]),
            "--cni-bin-dir",
            str(files["bin"]),
            "--cache-dir",
            str(root / "sriov-cache"),
            "--checkpoint",
            str(root / "plugins" / "checkpoint.json"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_preflight_passes_for_the_deployed_config_and_the_shipped_rbac(
    testbed,
    driver_crds,
    shipped_rbac_identity,
    node_files,
) -> None:
    out = preflight(node_files, testbed.kubeconfig_for(IDENTITY), "--plugin", "host-local", "-o", "json")
    assert out.returncode == 0, out.stdout + out.stderr
    checks = json.loads(out.stdout)["checks"]
    assert all(c["ok"] for c in checks), checks
    names = [c["name"] for c in checks]
    assert names[:3] == ["cni live reads on ADD", "cni-shim identity", "plugin host-local"]
    assert sum(n.startswith("may ") for n in names) == len(DRIVER_RIGHTS)
    assert "API network-attachment-definitions.k8s.cni.cncf.io/v1" in names
    shim = next(c for c in checks if c["name"] == "cni-shim identity")
    assert shim["detail"].startswith("cni-shim:") and "1.1.0" in shim["detail"]


def test_preflight_fails_with_one_line_per_problem(testbed, driver_crds, node_files) -> None:
    nobody = testbed.issue_identity("preflight-nobody", "preflight-nobody")
    config = json.loads(node_files["config"].read_text())
    node_files["config"].write_text(json.dumps({**config, "liveNetworkConfigOnAdd": False}))
    (node_files["root"] / "sriov-cache").rmdir()
    out = preflight(node_files, nobody, "--plugin", "host-local", "--plugin", "sriov")
    assert out.returncode == 1
    failures = out.stderr.splitlines()
    assert all(line.startswith("FAIL ") for line in failures)
    assert failures[0].startswith("FAIL cni live reads on ADD:")
    assert failures[1].startswith("FAIL plugin sriov:")
    assert failures[2].startswith(f"FAIL cache dir {node_files['root'] / 'sriov-cache'}:")
    assert len(failures) == 3 + len(DRIVER_RIGHTS)
    assert all("denied" in line for line in failures[3:])
    assert "Traceback" not in out.stderr
