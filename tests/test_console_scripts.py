"""The declared console scripts are installed, and the admin CLI answers --help."""

import subprocess
import sys
from importlib.metadata import entry_points

DECLARED = {"cni-shim", "cni-shim-daemon", "sriov-dra-driver", "sriov-dra"}


def test_console_scripts_are_declared() -> None:
    names = {
        ep.name
        for ep in entry_points(group="console_scripts")
        if ep.value.split(".")[0] in {"cni_shim", "sriov_dra"}
    }
    assert names >= DECLARED


def test_admin_cli_has_help() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from sriov_dra.cli import cli; cli()", "--help"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0
    assert "Inspect and operate" in out.stdout
