"""The CNI side (cni_shim + sriov_contract) needs neither the driver package nor the test plugins.

The CNI image and the host bundle ship without them, so an import of either, at module level or
deferred inside a function, would only fail on a node. Two proofs: every cni_shim module imports
in an interpreter where `driver` and `plugins` cannot be found, and no source line names them.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.support.deploy import REPO_ROOT

CNI_SIDE = ("cni_shim", "sriov_contract")
FORBIDDEN = ("driver", "plugins")

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


def test_no_cni_source_line_imports_driver_or_plugins_even_deferred() -> None:
    offenders = []
    for top in CNI_SIDE:
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                offenders += [
                    f"{path.relative_to(REPO_ROOT)}:{node.lineno} {n}"
                    for n in names
                    if n.split(".")[0] in FORBIDDEN
                ]
    assert offenders == []


def test_the_cni_image_is_built_from_the_cni_side_only() -> None:
    copied = [
        line.split()[1].rstrip("/")
        for line in (REPO_ROOT / "Dockerfile.cni").read_text().splitlines()
        if line.startswith("COPY ") and not line.startswith("COPY --from")
    ]
    assert not [c for c in copied if c in FORBIDDEN], copied
    assert set(CNI_SIDE) <= set(copied)
