"""The declared console scripts are installed, and the admin CLI answers --help."""

import subprocess
import sys
from importlib.metadata import distribution, entry_points

DECLARED = {"cni-shim", "cni-shim-daemon", "sriov-dra-driver", "sriov-dra", "sriov-operator"}


def test_console_scripts_are_declared() -> None:
    names = {
        ep.name
        for ep in entry_points(group="console_scripts")
        if ep.value.split(".")[0] in {"cni_shim", "sriov_dra", "sriov_operator"}
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


def test_the_distribution_installs_only_product_packages_under_specific_names() -> None:
    # Generic names such as `driver` or `plugins` would collide in site-packages; the test
    # plugins stay in the repository.
    top_level = distribution("auto-sriov").read_text("top_level.txt") or ""
    assert set(top_level.split()) == {
        "cni_shim",
        "sriov_contract",
        "sriov_dra",
        "sriov_lib",
        "sriov_operator",
    }


def test_the_operator_refuses_a_bad_configuration_naming_the_option() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from sriov_operator.main import main; main()", "--controllers", "nodes"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert (
        "InvalidOperatorConfiguration: --controllers 'nodes': choose from network, node-policy" in out.stderr
    )
