"""The CNI side (cni_shim, sriov_contract, sriov_lib) needs neither the driver package nor the test plugins.

The CNI image and the host bundle ship without them, so an import of either, at module level or
deferred inside a function, would only fail on a node. The import-linter contract in
pyproject.toml forbids such an import statically; here every cni_shim module really imports in an
interpreter where `sriov_dra` and `plugins` cannot be found.
"""

from __future__ import annotations

import subprocess
import sys

from tests.support.deploy import REPO_ROOT

CNI_SIDE = ("cni_shim", "sriov_contract", "sriov_lib")
FORBIDDEN = ("sriov_dra", "plugins")

BLOCKED_IMPORT = """
import importlib, importlib.abc, pkgutil, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {forbidden!r}:
            raise ModuleNotFoundError(f"blocked: {{name}}")
        return None

sys.meta_path.insert(0, Block())
for top in {packages!r}:
    package = importlib.import_module(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if not info.name.endswith(".__main__"):  # running it is the CNI executable itself
            importlib.import_module(info.name)
from cni_shim import daemon
try:
    daemon.cli(["--help"])
except SystemExit as done:
    assert done.code == 0, done.code
leaked = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})
print("leaked:", leaked)
"""


def test_every_cni_module_imports_and_the_daemon_starts_without_driver_or_plugins() -> None:
    out = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORT.format(forbidden=FORBIDDEN, packages=CNI_SIDE)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("leaked: []")


def copied(dockerfile: str) -> list[str]:
    return [
        line.split()[1].rstrip("/")
        for line in (REPO_ROOT / dockerfile).read_text().splitlines()
        if line.startswith("COPY ") and not line.startswith("COPY --from")
    ]


def test_the_cni_image_is_built_from_the_cni_side_only() -> None:
    sources = copied("Dockerfile.cni")
    assert not [c for c in sources if c in FORBIDDEN], sources
    assert set(CNI_SIDE) <= set(sources)


def test_the_driver_image_ships_no_test_plugins() -> None:
    sources = copied("Dockerfile.driver")
    assert "plugins" not in sources and "tests" not in sources, sources
    assert {"sriov_dra", "sriov_contract"} <= set(sources)
