"""Static checks of the two Dockerfiles (`make images` builds them for real: docs/images.md).

They must parse, copy only files the repository has, start real console scripts, expose the ports
the DaemonSets declare and pin their base image by a digest placeholder a release fills in.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from testbed.deployment import BASE_DIR, DEPLOY_DIR, load_documents
from tests.support.deploy import REPO_ROOT

INSTRUCTIONS = {
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
    "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
}  # fmt: skip
DOCKERFILES = {"Dockerfile.cni": "cni-daemonset.yaml", "Dockerfile.driver": "driver-daemonset.yaml"}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def parse(text: str) -> list[Instruction]:
    """Dockerfile instructions with continuation lines joined and comments dropped."""
    out: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    assert not pending, "the file ends inside a continued instruction"
    return out


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def console_scripts() -> set[str]:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return set(pyproject["project"]["scripts"])


def copy_parts(args: str) -> tuple[dict[str, str], list[str], str]:
    flags: dict[str, str] = {}
    words = args.split()
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        flags[key] = value
    return flags, words[:-1], words[-1]


@pytest.fixture(scope="module", params=sorted(DOCKERFILES))
def dockerfile(request: pytest.FixtureRequest) -> tuple[str, list[Instruction]]:
    name: str = request.param
    return name, parse((REPO_ROOT / name).read_text())


def test_every_instruction_is_known_and_the_first_real_one_is_from(dockerfile) -> None:
    name, instructions = dockerfile
    unknown = [(i.line, i.keyword) for i in instructions if i.keyword not in INSTRUCTIONS]
    assert not unknown, f"{name}: unknown instructions {unknown}"
    first = next(i for i in instructions if i.keyword != "ARG")
    assert first.keyword == "FROM", f"{name}: first instruction after ARGs is {first.keyword}"


def test_base_images_are_pinned_by_a_digest_placeholder(dockerfile) -> None:
    name, instructions = dockerfile
    args = dict(i.args.split("=", 1) for i in instructions if i.keyword == "ARG" and "=" in i.args)
    for ins in instructions:
        if ins.keyword != "FROM":
            continue
        ref = ins.args.split()[0]
        var = re.fullmatch(r"\$\{?(\w+)\}?", ref)
        image = args[var.group(1)] if var else ref
        assert re.search(r"@sha256:\S+$", image), (
            f"{name}:{ins.line}: base image {image} is not digest-pinned"
        )


def test_every_copy_source_exists_and_every_stage_reference_is_defined(dockerfile) -> None:
    name, instructions = dockerfile
    aliases: set[str] = set()
    for ins in instructions:
        if ins.keyword == "FROM":
            words = ins.args.split()
            if len(words) == 3 and words[1].upper() == "AS":
                aliases.add(words[2])
        if ins.keyword not in {"COPY", "ADD"}:
            continue
        flags, sources, _dest = copy_parts(ins.args)
        assert sources, f"{name}:{ins.line}: COPY without a source"
        if "from" in flags:
            assert flags["from"] in aliases, f"{name}:{ins.line}: unknown stage {flags['from']}"
            continue
        for src in sources:
            assert not Path(src).is_absolute() and ".." not in Path(src).parts, f"{name}:{ins.line}: {src}"
            assert (REPO_ROOT / src).exists(), (
                f"{name}:{ins.line}: COPY source {src} is not in the repository"
            )


def test_the_build_context_keeps_every_copy_source(dockerfile) -> None:
    name, instructions = dockerfile
    ignore = (REPO_ROOT / f"{name}.dockerignore").read_text().splitlines()
    patterns = [p.strip() for p in ignore if p.strip() and not p.startswith("#")]
    for ins in instructions:
        if ins.keyword != "COPY" or "from" in copy_parts(ins.args)[0]:
            continue
        for src in copy_parts(ins.args)[1]:
            hit = [p for p in patterns if fnmatch.fnmatch(src, p) or src == p or src.startswith(p + "/")]
            assert hit == [], f"{name}:{ins.line}: COPY {src} is excluded from the context by {hit}"


def test_the_entrypoint_is_a_declared_console_script_in_exec_form(dockerfile) -> None:
    name, instructions = dockerfile
    final = stages(instructions)[-1]
    entry = [i for i in final if i.keyword in {"ENTRYPOINT", "CMD"}]
    assert entry, f"{name}: the final stage has no ENTRYPOINT/CMD"
    for ins in entry:
        argv = json.loads(ins.args)
        assert isinstance(argv, list) and argv, f"{name}:{ins.line}: not exec form"
        if ins.keyword == "ENTRYPOINT":
            assert argv[0] in console_scripts(), f"{name}: {argv[0]} is not a console script in pyproject"


def test_the_final_stage_names_its_user_and_exposes_the_daemonset_metrics_port(dockerfile) -> None:
    name, instructions = dockerfile
    final = stages(instructions)[-1]
    assert any(i.keyword == "USER" for i in final), f"{name}: the final stage does not say which user runs"
    exposed = {int(p.split("/")[0]) for i in final if i.keyword == "EXPOSE" for p in i.args.split()}
    daemonset = load_documents(BASE_DIR / DOCKERFILES[name])[0]
    ports = {
        p["containerPort"]
        for c in daemonset["spec"]["template"]["spec"]["containers"]
        for p in c.get("ports", [])
        if p["name"] == "metrics"
    }
    assert ports, f"{DOCKERFILES[name]} declares no metrics port"
    assert ports <= exposed, f"{name} exposes {exposed}, the DaemonSet uses {ports}"


def test_the_driver_image_generates_the_kubelet_stubs_a_clean_checkout_lacks() -> None:
    text = (REPO_ROOT / "Dockerfile.driver").read_text()
    build = stages(parse(text))[0]
    runs = [i.args for i in build if i.keyword == "RUN"]
    gen = next(n for n, r in enumerate(runs) if "scripts/gen-protos" in r)
    wheel = next(n for n, r in enumerate(runs) if "pip wheel" in r)
    assert gen < wheel
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    tools = next(
        d for d in pyproject["project"]["optional-dependencies"]["dev"] if d.startswith("grpcio-tools")
    )
    assert f'"{tools}"' in runs[gen], f"the image's grpcio-tools pin differs from pyproject's {tools}"


def test_the_cni_init_container_runs_what_the_cni_image_installs() -> None:
    final = stages(parse((REPO_ROOT / "Dockerfile.cni").read_text()))[-1]
    destinations = {copy_parts(i.args)[2] for i in final if i.keyword == "COPY"}
    spec = load_documents(BASE_DIR / "cni-daemonset.yaml")[0]["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["command"][0] in destinations
    script = (DEPLOY_DIR / "cni" / "install-host-shim").read_text()
    bundle = re.search(r"SHIM_BUNDLE_DIR:-([^}]+)}", script)
    assert bundle, "install-host-shim has no default bundle directory"
    assert bundle.group(1) in destinations


def test_the_parser_rejects_what_a_builder_would() -> None:
    with pytest.raises(AssertionError, match="continued"):
        parse("FROM scratch\nRUN true \\\n")
    assert [i.keyword for i in parse("# c\nFROM a AS b\nRUN x \\\n  # note\n  y\n")] == ["FROM", "RUN"]
    assert parse("RUN x \\\n  y\n")[0].args == "x y"
