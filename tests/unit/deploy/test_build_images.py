"""scripts/build_images.py without building anything: the tags it gives the images, and the cache
key that decides whether `make images` builds at all."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path, PurePosixPath
from types import ModuleType

import pytest

from tests.support.deploy import REPO_ROOT, deploy_objects, operator_objects


def load_script() -> ModuleType:
    path = REPO_ROOT / "scripts" / "build_images.py"
    spec = importlib.util.spec_from_file_location("build_images", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up while the class is being made.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


images = load_script()


def test_each_image_is_tagged_exactly_as_the_manifests_run_it() -> None:
    run = {
        c["image"]
        for o in deploy_objects() + operator_objects()
        if o["kind"] in {"DaemonSet", "Deployment"}
        for c in o["spec"]["template"]["spec"].get("initContainers", [])
        + o["spec"]["template"]["spec"]["containers"]
    }
    references = images.manifest_references()
    assert set(references.values()) == run
    assert sorted(references) == sorted(p.name for p in images.PRODUCTS)


def test_the_real_dockerfiles_copy_only_hashable_existing_sources() -> None:
    for product in images.PRODUCTS:
        dockerfile = (REPO_ROOT / product.dockerfile).read_text()
        sources = images.copy_sources(dockerfile)
        assert "pyproject.toml" in sources
        files = images.context_files(
            REPO_ROOT, sources, images.ignore_patterns((REPO_ROOT / product.ignorefile).read_text())
        )
        assert files, product
        assert not [f for f in files if "__pycache__" in f.parts or f.suffix == ".pyc"]
        assert not [f for f in files if str(f).startswith("sriov_dra/kubeletplugin/gen/")]


def test_copy_sources_skip_other_stages_and_join_continued_lines() -> None:
    text = "FROM a AS b\n# c\nCOPY x \\\n  y /dst/\nCOPY --from=b /w /w\nADD --chown=0:0 z /z\nRUN cp q r\n"
    assert images.copy_sources(text) == ["x", "y", "z"]
    with pytest.raises(ValueError, match="JSON-form"):
        images.copy_sources('COPY ["a", "/b"]\n')


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("pkg/__pycache__/m.cpython-311.pyc", True),
        ("pkg/deep/m.pyc", True),
        ("sriov_dra/kubeletplugin/gen/api_pb2.py", True),
        ("sriov_dra/kubeletplugin/server.py", False),
        (".venv/bin/python", True),
        ("pkg/venv.py", False),
    ],
)
def test_ignore_patterns_leave_out_what_the_build_context_does(path: str, ignored: bool) -> None:
    patterns = images.ignore_patterns(
        "# c\n.git\n.venv\n**/__pycache__\n**/*.pyc\nsriov_dra/kubeletplugin/gen\n"
    )
    assert images.is_ignored(PurePosixPath(path), patterns) is ignored


def test_negated_ignore_patterns_are_refused() -> None:
    with pytest.raises(ValueError, match="negated"):
        images.ignore_patterns("**/*.pyc\n!keep.pyc\n")


@pytest.fixture
def context(tmp_path: Path) -> Path:
    (tmp_path / "Dockerfile.x").write_text(
        "ARG PYTHON_IMAGE=b\nFROM ${PYTHON_IMAGE}\nCOPY pkg ./pkg\nCOPY run.sh /r\n"
    )
    (tmp_path / "Dockerfile.x.dockerignore").write_text("**/__pycache__\n")
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "m.py").write_text("x = 1\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "unrelated.txt").write_text("docs\n")
    return tmp_path


def key(root: Path, reference: str = "r/x:1", base: object = None) -> str:
    product = images.Product("x", "Dockerfile.x")
    result: str = images.image_key(root, product, base or images.BaseRecipe(), reference)
    return result


def test_the_key_follows_every_input_that_decides_the_image(context: Path) -> None:
    before = key(context)
    assert key(context) == before
    (context / "pkg" / "__pycache__" / "m.pyc").write_bytes(b"\0")
    (context / "unrelated.txt").write_text("changed\n")
    assert key(context) == before, "ignored and never-copied files do not count"
    changes = [key(context, reference="r/x:2"), key(context, base=images.BaseRecipe(suite="trixie"))]
    (context / "run.sh").chmod(0o755)
    changes.append(key(context))
    (context / "pkg" / "m.py").write_text("x = 2\n")
    changes.append(key(context))
    (context / "Dockerfile.x.dockerignore").write_text("**/__pycache__\n**/*.pyc\n")
    changes.append(key(context))
    assert len({before, *changes}) == 1 + len(changes)


def test_a_missing_copy_source_is_an_error_not_an_empty_hash(context: Path) -> None:
    (context / "run.sh").unlink()
    with pytest.raises(FileNotFoundError, match=r"run\.sh"):
        key(context)


def test_the_base_stands_where_the_dockerfiles_expect_the_official_image() -> None:
    base = images.BaseRecipe()
    argv = base.mmdebstrap_args(Path("/out/rootfs.tar"))
    assert argv[0] == "mmdebstrap" and argv[-2:] == ["bookworm", "/out/rootfs.tar"]
    hooks = " ".join(a for a in argv if a.startswith("--customize-hook="))
    # Dockerfile.cni bundles this interpreter; Debian's pip refuses system installs without the removal.
    assert "/usr/local/bin/python3.11" in (REPO_ROOT / "Dockerfile.cni").read_text()
    assert "/usr/local/bin/python3.11" in hooks and "EXTERNALLY-MANAGED" in hooks
    assert (
        base.reference().endswith(base.key()) and base.key() != images.BaseRecipe(packages=("python3",)).key()
    )


def test_pruning_keeps_the_newest_builds_of_that_image_only(tmp_path: Path) -> None:
    def build(name: str, n: int) -> Path:
        directory = tmp_path / f"{name}-{n:016x}"
        directory.mkdir()
        (directory / ".complete").write_text("")
        os.utime(directory / ".complete", (n, n))
        return directory

    olds = [build("cni-shim", n) for n in range(1, 6)]
    other = build("cni-shim-extra", 1)
    failed = tmp_path / f"cni-shim-{0:016x}"
    failed.mkdir()
    current = olds[0]
    images.prune(tmp_path, "cni-shim", current)
    # The current build, the two newest others, another image's and an unfinished build stay.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (current, olds[4], olds[3], other, failed)
    )
