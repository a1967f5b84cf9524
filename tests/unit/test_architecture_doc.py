"""The README and docs/*.md stay true to the tree.

On every page: every repository path and every dotted module name quoted in backticks exists, and
every docs page is reachable from the README through relative links that resolve. On
docs/architecture.md: every product package is in the picture and the layer rules, every
subpackage is named, the packages it calls standard-library only import nothing else, its list of
pure cores is the purity contract's, and those cores do none of what the page says they never do.
Each checker is also run on a deliberately broken input, so none of them can pass by matching
nothing.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
ARCHITECTURE = REPO / "docs" / "architecture.md"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]


def product_packages(pyproject: Mapping[str, Any]) -> tuple[str, ...]:
    """The packages setuptools installs: `include = ["cni_shim*", ...]` without the globs."""
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    return tuple(sorted({pattern.rstrip("*").rstrip(".") for pattern in include}))


OUR_PACKAGES = product_packages(PYPROJECT)
# Dotted names under these roots are checked on every page; the bed and the bench are packages too.
NAME_ROOTS = (*OUR_PACKAGES, "testbed", "bench")
# Generated at build time by `make gen` (git-ignored), so not part of the documented layout.
GENERATED = frozenset({"sriov_dra.kubeletplugin.gen", "cni_shim.node.gen", "testbed.gen"})
# Backticked spans that look like relative paths but name API resources, not files.
NOT_REPO_PATHS = frozenset({"resourceclaims/status", "resourceclaims/driver"})

_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
_SPAN = re.compile(r"`([^`]+)`")  # inline code may wrap a line
_DOTTED = re.compile(r"\b(?:" + "|".join(NAME_ROOTS) + r")(?:\.\w+)*")
# A repository path: a lowercase, dot-free first segment (no `/abs`, `~`, `.venv`, `k8s.io/x`,
# `NS/NAME`), then at least one slash.
_REPO_PATH = re.compile(r"[a-z][a-z0-9_-]*/[A-Za-z0-9_./*-]*")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)


def spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks."""
    return _SPAN.findall(_FENCE.sub("", text))


def dotted_names(text: str) -> list[str]:
    """Every `sriov_dra.…`, `cni_shim.…`, `testbed.…` (or other root) name quoted in inline code."""
    found = {m.group(0) for span in spans(text) for m in _DOTTED.finditer(span)}
    return sorted(found)


def resolve(name: str) -> object:
    """Import the longest importable module prefix of `name`, then walk the rest as attributes.

    A `__main__` module is found, not imported: importing it would run the program."""
    if name.endswith(".__main__"):
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise ModuleNotFoundError(name)
        return spec
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


def _page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


# --- every page: paths and names ---------------------------------------------------------------


def test_the_page_names_our_modules() -> None:
    # Guards the extraction itself: a regex that matched nothing would pass every check below.
    assert len(dotted_names(ARCHITECTURE.read_text())) > 100


@pytest.mark.parametrize(
    ("page", "name"),
    [(_page_id(page), name) for page in PAGES for name in dotted_names(page.read_text())],
)
def test_every_name_on_every_page_exists(page: str, name: str) -> None:
    resolve(name)


@pytest.mark.parametrize(
    "misspelled",
    [
        "sriov_dra.prepare.managed.ManagedPreparer.ensure_managed_binding",
        "sriov_dra.prepare.manged.ManagedPreparer",
        "cni_shim.core.gaurd",
        "testbed.realnod",
        "sriov_lib.__main__",
    ],
)
def test_a_misspelled_name_does_not_resolve(misspelled: str) -> None:
    with pytest.raises((AttributeError, ModuleNotFoundError)):
        resolve(misspelled)


def test_names_are_found_on_pages_other_than_the_architecture_page() -> None:
    assert "bench.thick_compare" in dotted_names("`python -m bench.thick_compare`, `make bench`")
    assert any(dotted_names(page.read_text()) for page in PAGES if page != ARCHITECTURE)


@pytest.mark.parametrize("package", [sub for package in OUR_PACKAGES for sub in subpackages(package)])
def test_every_subpackage_is_on_the_architecture_page(package: str) -> None:
    names = dotted_names(ARCHITECTURE.read_text())
    assert any(n == package or n.startswith(package + ".") for n in names), (
        f"{package} is not mentioned in {ARCHITECTURE.relative_to(REPO)}"
    )


def test_subpackages_are_found() -> None:
    found = {sub for package in OUR_PACKAGES for sub in subpackages(package)}
    assert {"sriov_dra.prepare", "sriov_dra.core", "cni_shim.core", "sriov_operator.controllers"} <= found


@pytest.mark.parametrize("doc", PAGES, ids=_page_id)
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


# --- every page: links --------------------------------------------------------------------------


def anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def links(page: Path) -> list[tuple[Path, str]]:
    """(target file, fragment) of every relative link on the page, outside code."""
    found = []
    for target in _LINK.findall(_SPAN.sub("", _FENCE.sub("", page.read_text()))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        found.append(((page.parent / path).resolve() if path else page, fragment))
    return found


def broken_links(pages: Iterable[Path]) -> list[str]:
    broken = []
    for page in pages:
        for target, fragment in links(page):
            if not target.exists():
                broken.append(f"{page.name}: {target.name} does not exist")
            elif fragment and fragment not in {anchor(h) for h in _HEADING.findall(target.read_text())}:
                broken.append(f"{page.name}: {target.name} has no heading #{fragment}")
    return broken


def unreachable(start: Path, pages: Iterable[Path]) -> list[Path]:
    """The pages no chain of relative links leads to from `start`."""
    seen = {start.resolve()}
    todo = [start]
    while todo:
        for target, _ in links(todo.pop()):
            if target.suffix == ".md" and target.exists() and target not in seen:
                seen.add(target)
                todo.append(target)
    return [page for page in pages if page.resolve() not in seen]


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    orphans = unreachable(README, PAGES)
    assert not orphans, f"link these from README.md or a page it links: {[_page_id(p) for p in orphans]}"


def test_every_relative_link_resolves() -> None:
    assert broken_links(PAGES) == []


def test_the_link_checks_catch_an_orphan_and_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    readme = tmp_path / "README.md"
    readme.write_text("[a](docs/a.md), [gone](docs/gone.md), `[not a link](docs/b.md)`\n")
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Two words\n\n[up](../README.md#b), [ok](#two-words)\n")
    (tmp_path / "docs" / "b.md").write_text("# B\n\n[a](a.md)\n")
    pages = [readme, tmp_path / "docs" / "a.md", tmp_path / "docs" / "b.md"]
    assert [p.name for p in unreachable(readme, pages)] == ["b.md"]
    assert broken_links(pages) == [
        "README.md: gone.md does not exist",
        "a.md: README.md has no heading #b",
    ]


def test_anchors_follow_github() -> None:
    assert anchor("The compat suite, how to run it") == "the-compat-suite-how-to-run-it"
    assert anchor("4. The claim's `status.devices` is missing") == "4-the-claims-statusdevices-is-missing"


# --- docs/architecture.md: the picture and the rules --------------------------------------------


def picture(text: str) -> str:
    """The fenced block under '## The picture'."""
    section = text.split("## The picture", 1)[1]
    return section.split("```", 2)[1]


def rules(text: str) -> str:
    """What follows the picture up to the next heading: the layer rules."""
    after = text.split("## The picture", 1)[1].split("```", 2)[2]
    return after.split("\n## ", 1)[0]


def packages_missing_from_page(text: str, packages: Iterable[str]) -> list[str]:
    """Packages the picture does not draw or the rules do not name in backticks."""
    drawn = picture(text)
    named = dotted_names(rules(text))
    return [
        package
        for package in packages
        if not re.search(rf"\b{package}\b", drawn)
        or not any(n == package or n.startswith(package + ".") for n in named)
    ]


def test_every_product_package_is_in_the_picture_and_the_rules() -> None:
    assert {"sriov_dra", "cni_shim", "sriov_operator", "sriov_contract", "sriov_lib"} <= set(OUR_PACKAGES)
    assert packages_missing_from_page(ARCHITECTURE.read_text(), OUR_PACKAGES) == []


def test_a_page_that_leaves_a_package_out_fails() -> None:
    page = (
        "## The picture\n\n```\n+--- sriov_dra ---+  +--- cni_shim ---+\n+--- sriov_contract ---+\n```\n\n"
        "- **Layers**: `sriov_dra.main` > `cni_shim.main`; `sriov_contract` and the operator.\n\n## Next\n"
    )
    assert packages_missing_from_page(page, ["sriov_dra", "cni_shim", "sriov_contract"]) == []
    assert packages_missing_from_page(page, ["sriov_operator", "sriov_lib"]) == [
        "sriov_operator",
        "sriov_lib",
    ]


# --- docs/architecture.md: "standard library only" ----------------------------------------------

_STDLIB_ONLY = re.compile(r"(?:imports only the standard library|standard library only)((?:,? and `\w+`)*)")
_PACKAGE = re.compile(r"\b(" + "|".join(OUR_PACKAGES) + r")\b(?!\.)")  # a package, not a module in it


def stdlib_claims(text: str) -> dict[str, frozenset[str]]:
    """Package -> the packages besides the standard library it may import, for every clause of the
    page that calls a package standard-library only ("`x` imports only the standard library and
    `y`", or "x: standard library only" in the picture). The package is the last one named in the
    clause before the claim; a clause about one module (`cni_shim.thick.forward`) claims nothing."""
    claims: dict[str, frozenset[str]] = {}
    drawn = [line for block in re.findall(r"```.*?```", text, re.DOTALL) for line in block.splitlines()]
    prose = re.split(r"\n\s*\n|\n(?=\s*[-|] )", _FENCE.sub("", text))  # paragraphs, bullets, rows
    for chunk in [*drawn, *(" ".join(p.split()) for p in prose)]:
        for clause in re.split(r"[;.(]\s", chunk):
            for claim in _STDLIB_ONLY.finditer(clause):
                named = _PACKAGE.findall(clause[: claim.start()])
                if named:
                    allowed = frozenset(re.findall(r"`(\w+)`", claim.group(1)))
                    claims[named[-1]] = claims.get(named[-1], allowed) & allowed
    return claims


def uses(root: Path, module: str) -> Iterator[tuple[str, str]]:
    """(`file:line`, what) for every absolute import in `module` (a package or a single module)
    and every call of the builtin `open` (what is then "open")."""
    base = root / module.replace(".", "/")
    for path in sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]:
        where = path.relative_to(root)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                names = ["open"]
            else:
                continue
            yield from ((f"{where}:{node.lineno}", name) for name in names)


def non_stdlib_imports(root: Path, package: str, allowed: Iterable[str]) -> list[str]:
    """`file:line module` for every import in the package that is neither the standard library,
    the package itself nor an allowed package."""
    ok = set(sys.stdlib_module_names) | {package, *allowed, "open"}
    return [f"{where} {name}" for where, name in uses(root, package) if name.split(".")[0] not in ok]


def test_the_page_says_which_packages_are_standard_library_only() -> None:
    claims = stdlib_claims(ARCHITECTURE.read_text())
    assert claims.get("sriov_lib") == frozenset()
    assert claims.get("sriov_contract") == frozenset({"sriov_lib"})


@pytest.mark.parametrize("package", sorted(stdlib_claims(ARCHITECTURE.read_text())))
def test_a_standard_library_only_package_imports_nothing_else(package: str) -> None:
    allowed = stdlib_claims(ARCHITECTURE.read_text())[package]
    assert non_stdlib_imports(REPO, package, allowed) == [], (
        f"docs/architecture.md says {package} imports only the standard library"
        + (f" and {sorted(allowed)}" if allowed else "")
    )


def test_a_false_standard_library_claim_fails(tmp_path: Path) -> None:
    # The page before issue 29: the picture called the contract standard-library only while its
    # conformance module imported jsonschema.
    old = (
        "## The picture\n\n```\n+---- sriov_contract: standard library only, imported by both ----+\n```\n"
        "- **Helpers**: `sriov_lib` imports only the standard library; `cni_shim` imports a lot.\n"
        "- **Thick**: `cni_shim.thick.forward.run` posts (standard library only).\n"
    )
    assert stdlib_claims(old) == {"sriov_contract": frozenset(), "sriov_lib": frozenset()}
    package = tmp_path / "sriov_contract"
    package.mkdir()
    (package / "__init__.py").write_text("from __future__ import annotations\nimport json\nfrom . import x\n")
    (package / "conformance.py").write_text("import hashlib\nfrom jsonschema import Draft202012Validator\n")
    (package / "binding.py").write_text("from sriov_lib import rawjson\nimport sriov_contract.keys\n")
    assert non_stdlib_imports(tmp_path, "sriov_contract", []) == [
        "sriov_contract/binding.py:1 sriov_lib",
        "sriov_contract/conformance.py:2 jsonschema",
    ]
    assert non_stdlib_imports(tmp_path, "sriov_contract", ["sriov_lib", "jsonschema"]) == []
    claims = stdlib_claims(
        "`sriov_contract` imports only the standard library and `sriov_lib`, because ...\n"
    )
    assert claims == {"sriov_contract": frozenset({"sriov_lib"})}


# --- docs/architecture.md: the pure cores -------------------------------------------------------


def page_pure_cores(text: str) -> list[str]:
    """The backticked modules in the parentheses after '**Pure cores**'."""
    found = re.search(r"\*\*Pure cores\*\*\s*\(([^)]*)\)", " ".join(text.split()))
    return sorted(re.findall(r"`([\w.]+)`", found.group(1))) if found else []


def page_purity_rule(text: str) -> set[str]:
    """What the '**Pure cores**' bullet says they never import: its backticked undotted words
    (`kubernetes`/`urllib3` counts as two), `open` standing for the builtin."""
    bullet = re.search(r"\*\*Pure cores\*\*\s*\([^)]*\)(.*?)(?:\n- |\n\n)", text, re.DOTALL)
    words = re.findall(r"`([\w/]+)`", bullet.group(1)) if bullet else []
    return {w for word in words for w in word.split("/")}


def purity_contracts(pyproject: Mapping[str, Any]) -> list[dict[str, Any]]:
    contracts: list[dict[str, Any]] = pyproject["tool"]["importlinter"]["contracts"]
    return [c for c in contracts if c["type"] == "forbidden" and c["name"].startswith("the pure cores")]


def impurities(root: Path, module: str, forbidden: set[str]) -> list[str]:
    """`file:line what` for every import of a forbidden module and every call of builtin open
    (when `open` is forbidden) in `module`."""
    return [f"{where} {name}" for where, name in uses(root, module) if name.split(".")[0] in forbidden]


def test_the_page_lists_the_purity_contracts_cores() -> None:
    contracts = purity_contracts(PYPROJECT)
    assert contracts, "no import-linter contract named 'the pure cores ...' in pyproject.toml"
    listed = page_pure_cores(ARCHITECTURE.read_text())
    for contract in contracts:
        assert listed == sorted(contract["source_modules"]), contract["name"]


def test_the_page_states_the_file_io_rule() -> None:
    rule = page_purity_rule(ARCHITECTURE.read_text())
    assert {"os", "io", "pathlib", "shutil", "tempfile", "glob", "fcntl", "open", "subprocess"} <= rule


@pytest.mark.parametrize("core", page_pure_cores(ARCHITECTURE.read_text()))
def test_a_pure_core_does_nothing_the_page_rules_out(core: str) -> None:
    rule = page_purity_rule(ARCHITECTURE.read_text())
    assert impurities(REPO, core, rule) == []


def test_the_purity_checks_catch_a_core_that_reads_files(tmp_path: Path) -> None:
    page = (
        "- **Pure cores** (`cni_shim.core`, `sriov_dra.core`) import no `kubernetes`/`urllib3` and do no\n"
        "  file I/O: no `os` or `pathlib` imports and no builtin `open`.\n- **Next** `sriov_lib`\n"
    )
    assert page_pure_cores(page) == ["cni_shim.core", "sriov_dra.core"]
    assert page_purity_rule(page) == {"kubernetes", "urllib3", "os", "pathlib", "open"}
    contract = {"tool": {"importlinter": {"contracts": [
        {"name": "the pure cores import nothing", "type": "forbidden", "source_modules": ["sriov_dra.core", "cni_shim.core", "sriov_contract"]},
        {"name": "something else", "type": "forbidden", "source_modules": ["x"]},
    ]}}}  # fmt: skip
    assert [sorted(c["source_modules"]) for c in purity_contracts(contract)] != [page_pure_cores(page)]
    core = tmp_path / "cni_shim" / "core"
    core.mkdir(parents=True)
    (core / "delegates.py").write_text(
        "import os\nfrom pathlib import Path\nimport json\n\ndef load(p):\n    with open(p) as f:\n        return f.read()\n"
    )
    (core / "fine.py").write_text("from cni_shim.core import delegates\nopen_ = 1\n")
    assert impurities(tmp_path, "cni_shim.core", {"os", "pathlib", "open", "kubernetes"}) == [
        "cni_shim/core/delegates.py:1 os",
        "cni_shim/core/delegates.py:2 pathlib",
        "cni_shim/core/delegates.py:6 open",
    ]
