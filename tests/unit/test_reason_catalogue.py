"""Every stable reason is defined once, in a catalogue, and raised through its constant.

The catalogues are sriov_contract.reasons (what the contract raises, and what both sides share),
sriov_dra.reasons and cni_shim.reasons. The checks read the product modules' source (AST), so a
new `raise ReasonedError("NewThing", ...)` fails here before it reaches an operator; docs/reasons.md
is generated from the catalogues and the README names no reason they lack.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sriov_dra", "cni_shim", "sriov_contract")
CATALOGUES = ("sriov_contract/reasons.py", "sriov_dra/reasons.py", "cni_shim/reasons.py")
CAMEL_CASE = re.compile(r"(?=.*[a-z])[A-Z][A-Za-z0-9]*")
# Strings that equal a reason but are something else: the orphan scan's status of a shadow.
NOT_A_REASON = {("sriov_dra/recovery/orphans.py", "Conflict"), ("sriov_dra/cli/inspect.py", "Conflict")}
# CamelCase words the docs use that are not reasons (kinds, phases, field and function names).
DOC_WORDS = {
    "DeviceAttributes",
    "ReleaseComplete",
    "SriovResourcePolicy",
    "SriovNetwork",
    "SriovNetworkNodePolicy",
    "SriovNetworkNodeState",
    "SriovOperatorConfig",
    "ValidateInterfaceName",
    "PodUID",
    "NaN",
}


def _product_modules() -> Iterator[tuple[str, ast.Module]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/gen/" not in rel:
                yield rel, ast.parse(path.read_text(), rel)


def _catalogue(rel: str) -> dict[str, str]:
    """NAME -> value of every reason constant the catalogue module assigns."""
    found: dict[str, str] = {}
    for node in ast.parse((ROOT / rel).read_text()).body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Constant):
            continue
        if not isinstance(value.value, str) or target.id.startswith("_") or not target.id.isupper():
            continue
        assert target.id not in found, f"{rel}: {target.id} is assigned twice"
        found[target.id] = value.value
    return found


CATALOGUE = {rel: _catalogue(rel) for rel in CATALOGUES}
VALUES = {value for names in CATALOGUE.values() for value in names.values()}


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
    }


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _first_param(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args if a.arg not in ("self", "cls")]
    return params[0] if params else ""


def reason_takers(trees: list[ast.Module], known: frozenset[str] = frozenset()) -> set[str]:
    """What takes a reason first: ReasonedError, every class derived from it whose constructor
    does (cni_shim's ApiError derives its own), and every function whose first parameter is
    `reason` (the modules' `fail`/`_refuse` helpers)."""
    derived = {"ReasonedError", *known}
    takes = set(derived)
    classes = [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    grew = True
    while grew:
        grew = False
        for cls in classes:
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases}
            if cls.name in derived or not bases & derived:
                continue
            derived.add(cls.name)
            grew = True
            inits = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
            if (_first_param(inits[0]) == "reason") if inits else bool(bases & takes):
                takes.add(cls.name)
    for tree in trees:
        for fn in ast.walk(tree):
            if (
                isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
                and fn.name != "__init__"
                and _first_param(fn) == "reason"
            ):
                takes.add(fn.name)
    return takes | {f"class {name}" for name in derived}


def literal_reasons(tree: ast.Module, takers: set[str]) -> list[tuple[int, str]]:
    """(line, source) of every reason argument that spells a string instead of naming a constant;
    a subclass's `super().__init__(reason, ...)` counts as a raise of its base."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _callee(n) in takers]
    for cls in ast.walk(tree):
        # ReasonedError's own super().__init__ is Exception's, which takes the finished text.
        if isinstance(cls, ast.ClassDef) and f"class {cls.name}" in takers and cls.name != "ReasonedError":
            calls += [n for n in ast.walk(cls) if isinstance(n, ast.Call) and _callee(n) == "__init__"]
    found = []
    for call in calls:
        args = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "reason")]
        for arg in args:
            if any(
                isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, str))
                for n in ast.walk(arg)
            ):
                found.append((call.lineno, ast.unparse(arg)))
    return found


def _load(rel: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(Path(rel).stem, ROOT / rel)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODULES = list(_product_modules())


def _program(rel: str) -> str:
    return rel.split("/", 1)[0]


# The programs never import each other (an import-linter contract), so a name means one class
# within a program and the contract they share: sriov_dra.apierrors.ApiError takes a reason,
# cni_shim.errors.ApiError derives its own.
TAKERS = {
    program: reason_takers([tree for rel, tree in MODULES if _program(rel) in (program, "sriov_contract")])
    for program in PACKAGES
}


def test_the_catalogues_define_each_reason_once_in_camel_case() -> None:
    seen: dict[str, str] = {}
    for rel, names in CATALOGUE.items():
        assert names, rel
        for name, value in names.items():
            assert CAMEL_CASE.fullmatch(value), f"{rel}: {name} = {value!r} is not CamelCase"
            assert value not in seen, f"{value} is defined in {seen[value]} and {rel}"
            seen[value] = rel


@pytest.mark.parametrize("rel", CATALOGUES)
def test_every_reason_says_what_it_means_and_what_to_do(rel: str) -> None:
    meanings = _load(rel).MEANINGS
    assert set(meanings) == set(CATALOGUE[rel].values())
    for reason, entry in meanings.items():
        meaning, action = entry
        for text in (meaning, action):
            assert text.strip() and "\n" not in text, f"{rel}: {reason}: {text!r}"


def test_no_reason_is_raised_as_a_string_literal() -> None:
    assert {"ContractError", "ApiError", "fail", "_refuse"} <= TAKERS["sriov_dra"]
    assert {"CniError", "ContractError", "class ApiError"} <= TAKERS["cni_shim"]
    literals = [
        f"{rel}:{line}: {source}"
        for rel, tree in MODULES
        if rel not in CATALOGUES
        for line, source in literal_reasons(tree, TAKERS[_program(rel)])
    ]
    assert literals == [], "name the reason's constant from a catalogue instead:\n" + "\n".join(literals)


def test_no_module_spells_a_catalogued_reason() -> None:
    """Reasons chosen by a table or a conditional (not a raise) also name the constant."""
    spelled = []
    for rel, tree in MODULES:
        if rel in CATALOGUES:
            continue
        docs = _docstrings(tree)
        spelled += [
            f"{rel}:{n.lineno}: {n.value!r}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and n.value in VALUES
            and id(n) not in docs
            and (rel, n.value) not in NOT_A_REASON
        ]
    assert spelled == []


def test_every_catalogued_reason_is_used() -> None:
    used: set[str] = set()
    for rel, tree in MODULES:
        if rel in CATALOGUES:
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Name):
                used.add(n.id)
            elif isinstance(n, ast.Attribute):
                used.add(n.attr)
            elif isinstance(n, ast.ImportFrom):
                used.update(a.name for a in n.names)
    unused = [f"{rel}: {name}" for rel, names in CATALOGUE.items() for name in names if name not in used]
    assert unused == []


@pytest.mark.parametrize(
    "source",
    [
        'raise ReasonedError("NewThing", "message")',
        'class NewError(ContractError):\n    pass\nraise NewError("NewThing", "message")',
        'raise CniError(reason="NewThing", message="m", code=7)',
        'raise errors.CniError(f"New{kind}", "message")',
        'def _refuse(reason, claim, why):\n    pass\nraise _refuse("A" if x else "B", claim, "why")',
    ],
)
def test_the_check_catches_a_new_literal_reason(source: str) -> None:
    tree = ast.parse(source)
    assert literal_reasons(tree, reason_takers([tree], frozenset(TAKERS["cni_shim"])))


def test_the_check_accepts_a_named_reason() -> None:
    tree = ast.parse("raise CniError(reasons.DELEGATE_FAILED, f'netplugin {p} failed', 7)")
    assert literal_reasons(tree, TAKERS["cni_shim"]) == []


def test_docs_reasons_md_is_generated_from_the_catalogues() -> None:
    generator = _load("scripts/gen_reasons.py")
    assert (ROOT / "docs" / "reasons.md").read_text() == generator.render(), (
        "docs/reasons.md is stale: run .venv/bin/python scripts/gen_reasons.py"
    )


@pytest.mark.parametrize(
    "doc",
    ["README.md", "fixtures/README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))],
)
def test_every_reason_the_docs_name_is_catalogued(doc: str) -> None:
    """A backticked CamelCase word of two or more parts in the README or docs is a reason unless
    DOC_WORDS says otherwise, and every such reason is in a catalogue."""
    words = set(re.findall(r"`([A-Z][a-z][A-Za-z0-9]*[A-Z][A-Za-z0-9]*)`", (ROOT / doc).read_text()))
    assert words - DOC_WORDS <= VALUES, (
        f"{doc} names reasons no catalogue defines: {sorted(words - DOC_WORDS - VALUES)}"
    )


# --- finding where a reason is raised -----------------------------------------------------------
# The pages tell an operator how to go from a reason to the code that raises it. The instruction is
# a `grep` whose pattern is a placeholder the page asks the reader to replace; the check replaces it
# as the page says and runs the grep (in Python) over every raise site of every catalogued reason.

# Placeholder -> what the reader puts in its place: the constant's name, or the reason itself.
PLACEHOLDERS = {"REASON_CONSTANT": "constant", "ReasonName": "reason"}
CONSTANTS = {name: value for names in CATALOGUE.values() for name, value in names.items()}
SOURCES = {rel: (ROOT / rel).read_text().splitlines() for rel, _tree in MODULES}


def grep_instructions(text: str) -> list[list[str]]:
    """Every `grep ...` command quoted in inline code whose pattern is a reason placeholder."""
    commands = [span.split() for span in re.findall(r"`(grep\s[^`]+)`", text)]
    return [argv for argv in commands if set(argv) & set(PLACEHOLDERS)]


def raise_sites(tree: ast.Module, takers: set[str]) -> list[tuple[int, str]]:
    """(line, constant) of every catalogue constant passed as the reason of a raise."""
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or _callee(call) not in takers:
            continue
        for arg in [*call.args[:1], *(k.value for k in call.keywords if k.arg == "reason")]:
            for node in ast.walk(arg):
                if isinstance(node, ast.Name) and node.id in CONSTANTS:
                    found.append((node.lineno, node.id))
                elif isinstance(node, ast.Attribute) and node.attr in CONSTANTS:
                    found.append((node.lineno, node.attr))
    return found


def grep_finds(argv: list[str], rel: str, line: str, constant: str) -> bool:
    """Whether `argv` (grep [-flags] PATTERN DIR...), its placeholder replaced, prints this line."""
    flags = "".join(a[1:] for a in argv[1:] if a.startswith("-"))
    pattern, *dirs = [a for a in argv[1:] if not a.startswith("-")]
    needle = constant if PLACEHOLDERS.get(pattern) == "constant" else CONSTANTS.get(constant, "")
    if pattern not in PLACEHOLDERS or "r" not in flags:
        return False
    if not any(rel.startswith(d.rstrip("/") + "/") for d in dirs):
        return False
    if "w" in flags:
        return re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", line) is not None
    return needle in line


def unfound_raise_sites(
    argv: list[str], modules: list[tuple[str, ast.Module]], sources: dict[str, list[str]]
) -> list[str]:
    return [
        f"{rel}:{line} {constant}"
        for rel, tree in modules
        for line, constant in raise_sites(tree, TAKERS[_program(rel)])
        if not grep_finds(argv, rel, sources[rel][line - 1], constant)
    ]


def test_there_are_raise_sites_to_find() -> None:
    sites = {rel: raise_sites(tree, TAKERS[_program(rel)]) for rel, tree in MODULES}
    assert sum(len(s) for s in sites.values()) > 100
    assert all(any(rel.startswith(p + "/") and s for rel, s in sites.items()) for p in PACKAGES)


@pytest.mark.parametrize("doc", ["docs/architecture.md", "docs/troubleshooting.md", "docs/reasons.md"])
def test_the_page_says_how_to_find_where_a_reason_is_raised(doc: str) -> None:
    assert grep_instructions((ROOT / doc).read_text()), f"{doc} lost its grep instruction"


@pytest.mark.parametrize(
    ("doc", "command"),
    [
        (doc, " ".join(argv))
        for doc in ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
        for argv in grep_instructions((ROOT / doc).read_text())
    ],
)
def test_the_grep_instruction_finds_every_raise_site(doc: str, command: str) -> None:
    unfound = unfound_raise_sites(command.split(), MODULES, SOURCES)
    assert unfound == [], f"{doc}: `{command}` misses these raise sites"


def test_a_grep_for_the_reason_itself_finds_no_raise_site() -> None:
    # The instruction before issue 29: raise sites name the constant, never the reason's text.
    old = ["grep", "-rn", "ReasonName", "sriov_dra", "cni_shim", "sriov_contract"]
    assert len(unfound_raise_sites(old, MODULES, SOURCES)) == sum(
        len(raise_sites(t, TAKERS[_program(r)])) for r, t in MODULES
    )


def test_a_grep_that_skips_a_package_misses_its_raise_sites() -> None:
    source = "raise CniError(\n    reasons.POD_UID_MISMATCH,\n    'pod uid mismatch',\n)\n"
    modules = [("cni_shim/handler.py", ast.parse(source))]
    sources = {"cni_shim/handler.py": source.splitlines()}
    good = ["grep", "-rnw", "REASON_CONSTANT", "sriov_dra", "cni_shim", "sriov_contract"]
    assert unfound_raise_sites(good, modules, sources) == []
    assert unfound_raise_sites([*good[:-2], "sriov_contract"], modules, sources) == [
        "cni_shim/handler.py:2 POD_UID_MISMATCH"
    ]
    assert unfound_raise_sites(["grep", "-rnw", "UNKNOWN_PLACEHOLDER", "cni_shim"], modules, sources) != []


def test_the_reasons_page_names_each_reasons_constant() -> None:
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \|", (ROOT / "docs" / "reasons.md").read_text(), re.MULTILINE)
    assert {constant: reason for reason, constant in rows} == CONSTANTS
