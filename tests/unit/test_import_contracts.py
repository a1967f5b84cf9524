"""The import-linter contracts in pyproject.toml see real edges: the tree keeps them, and one
forbidden import, or one allowed edge taken away, breaks the contract that names it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = (
    "sriov_dra",
    "cni_shim",
    "sriov_contract",
    "sriov_lib",
    "sriov_operator",
    "plugins",
    "testbed",
    "bench",
)
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    # Run from the copy with only that copy on the path, so grimp reads the copy's sources.
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for pkg in PACKAGES:
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__", "gen"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(root: Path, module: str, statement: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{statement}\n")


def broken(result: subprocess.CompletedProcess[str]) -> str:
    """The report's "Broken contracts" section, whitespace folded (contract names wrap)."""
    assert result.returncode != 0, result.stdout
    _, _, section = result.stdout.partition("Broken contracts")
    return " ".join(section.split())


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "statement", "contract"),
    [
        ("sriov_dra.core.pci", "import subprocess", "the pure cores import no adapter"),
        ("cni_shim.core.protocol", "import sriov_dra.model", "the CNI side and the contract never import"),
        ("cni_shim.handler.add", "from cni_shim.kube import thin_client", "CNI layers"),
        ("sriov_dra.prepare.host", "from sriov_dra.kube import resources", "driver layers"),
        ("sriov_dra.recovery.repair", "import sriov_dra.prepare.managed", "driver layers"),
        ("sriov_dra.prepare.podnetworks", "import kubernetes", "flows and state reach the API server"),
        ("plugins.recorder", "import cni_shim.errors", "the contract and the test plugins import no product"),
        (
            "sriov_lib.quickjson",
            "import sriov_contract.keys",
            "the shared helpers import only the standard library",
        ),
        ("sriov_lib.durable", "import yaml", "the shared helpers import only the standard library"),
        ("sriov_operator.core.plan", "import kubernetes", "the operator's pure core imports no adapter"),
        # File I/O: each module the pure cores may not import, tried in one of them.
        ("cni_shim.core.protocol", "import os", "the pure cores import no adapter"),
        ("sriov_dra.core.pci", "import io", "the pure cores import no adapter"),
        ("sriov_contract.keys", "from pathlib import Path", "the pure cores import no adapter"),
        ("cni_shim.core.versions", "import shutil", "the pure cores import no adapter"),
        ("sriov_dra.core.pci", "import tempfile", "the pure cores import no adapter"),
        ("sriov_contract.keys", "import glob", "the pure cores import no adapter"),
        ("cni_shim.core.protocol", "import fcntl", "the pure cores import no adapter"),
        ("sriov_contract.keys", "from sriov_lib import durable", "the pure cores import no adapter"),
        ("sriov_operator.core.plan", "import os", "the operator's pure core imports no adapter"),
        ("sriov_operator.core.keys", "from sriov_lib import durable", "the operator's pure core imports no"),
        ("sriov_operator.core.plan", "import sriov_operator.kube.api", "operator layers"),
        (
            "sriov_operator.controllers.network",
            "import kubernetes",
            "the operator's controllers reach the API",
        ),
        ("sriov_operator.core.keys", "import sriov_dra.model", "the operator and the driver share only"),
        ("sriov_dra.core.pci", "import sriov_operator.core.keys", "the operator and the driver share only"),
        (
            "testbed.waiting",
            "import tests.support.cni",
            "the test bed and the bench are products of their own",
        ),
        (
            "bench.common",
            "from tests.support import kubelet",
            "the test bed and the bench are products of their own",
        ),
        (
            "cni_shim.errors",
            "import testbed.waiting",
            "the products and the test plugins never import the test bed",
        ),
        (
            "plugins.recorder",
            "import bench.common",
            "the products and the test plugins never import the test bed",
        ),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tree: Path, module: str, statement: str, contract: str
) -> None:
    add_import(tree, module, statement)
    assert contract in broken(lint(tree))


def test_taking_away_an_allowed_edge_breaks_the_layers(tree: Path) -> None:
    # core imports model: with model placed above core, that real edge is a violation.
    config = tree / "pyproject.toml"
    text = config.read_text()
    swapped = text.replace(
        '    "sriov_dra.core",\n    "sriov_dra.model",\n', '    "sriov_dra.model",\n    "sriov_dra.core",\n'
    )
    assert swapped != text
    config.write_text(swapped)
    assert "driver layers" in broken(lint(tree))
