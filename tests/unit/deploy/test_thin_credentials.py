"""deploy/cni/thin-credentials: the kubeconfig thin mode's host-side shim reads, and the token it
keeps current, written for real into a temporary stand-in for the host directory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cni_shim.kube import kubeconfig
from testbed.deployment import DEPLOY_DIR

SCRIPT = DEPLOY_DIR / "cni" / "thin-credentials"


@pytest.fixture
def account(tmp_path: Path) -> Path:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "ca.crt").write_text("CA\n")
    (sa / "token").write_text("token-1")
    return sa


def run(account: Path, host: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ["PATH"],
        "SERVICE_ACCOUNT_DIR": str(account),
        "HOST_CREDENTIALS_DIR": str(host),
    }
    return subprocess.run(
        [str(SCRIPT), *args], env={**base, **env}, capture_output=True, text=True, timeout=30
    )


def test_once_writes_a_kubeconfig_the_shim_reads_with_files_beside_it(account: Path, tmp_path: Path) -> None:
    host = tmp_path / "host" / "auto-sriov.d"
    out = run(account, host, "--once", KUBERNETES_SERVICE_HOST="fd00::1", KUBERNETES_SERVICE_PORT="6443")
    assert out.returncode == 0, out.stderr
    conn = kubeconfig.load(str(host / "kubeconfig"))
    assert conn.server == "https://[fd00::1]:6443"
    assert (conn.ca_file, conn.token_file) == (str(host / "ca.crt"), str(host / "token"))
    assert (host / "token").read_text() == "token-1"
    # Only root on the host may read a ServiceAccount token.
    assert {p.name: p.stat().st_mode & 0o077 for p in [host, *host.iterdir()]} == {
        "auto-sriov.d": 0,
        "kubeconfig": 0,
        "ca.crt": 0,
        "token": 0,
    }


def test_a_rotated_token_replaces_the_old_one_and_an_explicit_server_wins(
    account: Path, tmp_path: Path
) -> None:
    host = tmp_path / "creds"
    assert run(account, host, "--once", API_SERVER="https://10.0.0.1:6443").returncode == 0
    (account / "token").write_text("token-2")
    assert run(account, host, "--once", API_SERVER="https://10.0.0.1:6443").returncode == 0
    assert (host / "token").read_text() == "token-2"
    assert kubeconfig.load(str(host / "kubeconfig")).server == "https://10.0.0.1:6443"
    assert sorted(p.name for p in host.iterdir()) == ["ca.crt", "kubeconfig", "token"]


def test_without_any_server_it_says_what_is_missing(account: Path, tmp_path: Path) -> None:
    out = run(account, tmp_path / "creds", "--once")
    assert out.returncode != 0
    assert "neither API_SERVER nor KUBERNETES_SERVICE_HOST is set" in out.stderr
