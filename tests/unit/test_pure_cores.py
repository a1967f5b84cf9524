"""The pure cores open no file: what an import rule cannot see.

The import-linter contracts keep `os`, `io`, `pathlib` and the other file modules out of
sriov_dra.core, cni_shim.core, sriov_contract and sriov_operator.core, but the builtin `open`
needs no import. Here every module of those cores is read as source (AST) and may not name it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE_CORES = ("sriov_dra/core", "cni_shim/core", "sriov_contract", "sriov_operator/core")
_BUILTINS = ("builtins", "__builtins__")


def opens(tree: ast.AST) -> list[int]:
    """Lines that name the builtin `open` (a call, or the function handed on) or `builtins.open`."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.expr) and _names_open(node)]


def _names_open(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "open" and isinstance(node.ctx, ast.Load)
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "open"
        and isinstance(node.value, ast.Name)
        and node.value.id in _BUILTINS
    )


def modules() -> list[Path]:
    return sorted(p for core in PURE_CORES for p in (ROOT / core).rglob("*.py"))


def test_the_pure_cores_are_found() -> None:
    found = {p.relative_to(ROOT).parts[0] for p in modules()}
    assert found == {"sriov_dra", "cni_shim", "sriov_contract", "sriov_operator"}
    assert ROOT / "cni_shim/core/delegates.py" in modules()


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_pure_core_module_opens_a_file(path: Path) -> None:
    lines = opens(ast.parse(path.read_text(), str(path)))
    assert lines == [], f"{path.relative_to(ROOT)} opens a file on lines {lines}: read it in an adapter"


@pytest.mark.parametrize(
    "source",
    [
        "with open(path, 'rb') as fh:\n    data = fh.read()",
        "reader = open\ndata = reader(path).read()",
        "import builtins\ndata = builtins.open(path).read()",
    ],
)
def test_the_check_sees_an_open(source: str) -> None:
    assert opens(ast.parse(source)) != []


def test_the_check_lets_a_method_named_open_be() -> None:
    assert opens(ast.parse("files.open(path)\nclass Door:\n    def open(self): ...")) == []
