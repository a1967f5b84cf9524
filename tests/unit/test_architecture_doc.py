"""docs/architecture.md and the README stay true to the tree: every module, class and function the
architecture page names in backticks exists, every subpackage is on the page, and every repository
path the README and docs/*.md quote exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
OUR_PACKAGES = ("sriov_dra", "cni_shim", "sriov_contract", "sriov_lib", "sriov_operator")
# Generated at build time by `make gen` (git-ignored), so not part of the documented layout.
GENERATED = frozenset({"sriov_dra.kubeletplugin.gen"})
# Backticked spans that look like relative paths but name API resources, not files.
NOT_REPO_PATHS = frozenset({"resourceclaims/status", "resourceclaims/driver"})

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
_SPAN = re.compile(r"`([^`]+)`")  # inline code may wrap a line
_DOTTED = re.compile(r"\b(?:" + "|".join(OUR_PACKAGES) + r")(?:\.\w+)*")
# A repository path: a lowercase, dot-free first segment (no `/abs`, `~`, `.venv`, `k8s.io/x`,
# `NS/NAME`), then at least one slash.
_REPO_PATH = re.compile(r"[a-z][a-z0-9_-]*/[A-Za-z0-9_./*-]*")


def spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks."""
    return _SPAN.findall(_FENCE.sub("", text))


def dotted_names(text: str) -> list[str]:
    """Every `sriov_dra.…`, `cni_shim.…` and `sriov_contract.…` name quoted in inline code."""
    found = {m.group(0) for span in spans(text) for m in _DOTTED.finditer(span)}
    return sorted(found)


def resolve(name: str) -> object:
    """Import the longest importable module prefix of `name`, then walk the rest as attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj: object = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise  # a real missing dependency inside one of our modules
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError names the misspelled part
        return obj
    raise ModuleNotFoundError(name)


def repo_paths(text: str) -> list[str]:
    """Repository-relative paths quoted in inline code, commands included (`kubectl apply -k deploy/`).

    A placeholder ends the literal part: `bench/results/<date>.json` is checked as `bench/results/`.
    """
    out = []
    for span in spans(text):
        for word in span.split():
            token = word.rstrip(",;:)]")
            if "<" in token:
                token = token[: token.index("<")]
                token = token[: token.rfind("/") + 1]
            if _REPO_PATH.fullmatch(token) and token not in NOT_REPO_PATHS:
                out.append(token)
    return out


def path_exists(path: str) -> bool:
    if "*" in path:
        return any(REPO.glob(path))
    return (REPO / path).exists()


def subpackages(package: str) -> list[str]:
    root = REPO / package
    found = []
    for init in sorted(root.rglob("__init__.py")):
        if init.parent == root or "__pycache__" in init.parts:
            continue
        name = ".".join(init.parent.relative_to(REPO).parts)
        if not any(name == g or name.startswith(g + ".") for g in GENERATED):
            found.append(name)
    return found


def test_the_page_names_our_modules() -> None:
    # Guards the extraction itself: a regex that matched nothing would pass every check below.
    assert len(dotted_names(ARCHITECTURE.read_text())) > 100


@pytest.mark.parametrize("name", dotted_names(ARCHITECTURE.read_text()))
def test_every_name_on_the_architecture_page_exists(name: str) -> None:
    resolve(name)


@pytest.mark.parametrize(
    "misspelled",
    [
        "sriov_dra.prepare.managed.ManagedPreparer.ensure_managed_binding",
        "sriov_dra.prepare.manged.ManagedPreparer",
        "cni_shim.core.gaurd",
    ],
)
def test_a_misspelled_name_does_not_resolve(misspelled: str) -> None:
    with pytest.raises((AttributeError, ModuleNotFoundError)):
        resolve(misspelled)


@pytest.mark.parametrize("package", subpackages("sriov_dra") + subpackages("cni_shim"))
def test_every_subpackage_is_on_the_architecture_page(package: str) -> None:
    names = dotted_names(ARCHITECTURE.read_text())
    assert any(n == package or n.startswith(package + ".") for n in names), (
        f"{package} is not mentioned in {ARCHITECTURE.relative_to(REPO)}"
    )


def test_subpackages_are_found() -> None:
    assert {"sriov_dra.prepare", "sriov_dra.core", "cni_shim.core", "cni_shim.thick"} <= set(
        subpackages("sriov_dra") + subpackages("cni_shim")
    )


DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_quoted_repo_path_exists(doc: Path) -> None:
    paths = repo_paths(doc.read_text())
    missing = [p for p in paths if not path_exists(p)]
    assert not missing, f"{doc.relative_to(REPO)} quotes paths that do not exist: {missing}"


def test_path_extraction() -> None:
    text = (
        "See `driver/managed.py`, `kubectl apply -k deploy/`, `bench/results/<date>.json`,\n"
        "not `/sys`, `~/.cache/x/`, `k8s.v1.cni.cncf.io/networks`, `NS/NAME`, `resourceclaims/status`.\n"
        "```\nscripts/never-checked\n```\n"
    )
    assert repo_paths(text) == ["driver/managed.py", "deploy/", "bench/results/"]
    assert not path_exists("driver/managed.py")
