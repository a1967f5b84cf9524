"""`make images`: the two product images, built here from the repository's own Dockerfiles.

No image can be pulled on these machines, so the base is made from Debian packages (mmdebstrap ->
a rootfs tarball -> `buildah commit`), laid out where the Dockerfiles expect the official Python
image's files. Dockerfile.driver and Dockerfile.cni are then built unchanged with buildah
(`--build-arg PYTHON_IMAGE=<that base>`; the release keeps the digest-pinned official base), tagged
exactly as deploy/base/kustomization.yaml names them and exported as OCI archives for the nodes'
containerd (`ctr -n k8s.io images import`).

Each image is cached by a key over everything that decides its content: the base recipe, the
Dockerfile and its ignore file, every file its COPY instructions take from the context (what the
ignore file leaves), the build arguments and the tag. A warm run only hashes those files.

Cache layout (AUTO_SRIOV_IMAGES_CACHE, default ~/.cache/auto-sriov-images), one directory per key:
    python-base-<key>/   rootfs.tar, build.log, .complete | .failed
    <image>-<key>/       image.oci.tar, reference, build.log, .complete | .failed
`.complete` means usable; `.failed` holds the reason, which whoever needs the image quotes.

Usage: scripts/build_images.py [--print-dir] [--tag TAG] [image...]   (images: sriov-dra-driver cni-shim)
"""

from __future__ import annotations

import argparse
import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
KUSTOMIZATION = REPO_ROOT / "deploy" / "base" / "kustomization.yaml"
# Bumped when the way an image is built changes in a way no hashed input shows.
RECIPE_VERSION = 1
# How many keyed builds of one image stay in the cache (the newest; older ones are removed).
KEEP = 3


@dataclass(frozen=True)
class Product:
    """One product image: its name (the last part of the manifests' image name) and its Dockerfile."""

    name: str
    dockerfile: str

    @property
    def ignorefile(self) -> str:
        return f"{self.dockerfile}.dockerignore"


PRODUCTS = (Product("sriov-dra-driver", "Dockerfile.driver"), Product("cni-shim", "Dockerfile.cni"))


@dataclass(frozen=True)
class BaseRecipe:
    """The Python 3.11 base made from Debian packages, standing in for python:3.11-slim-bookworm."""

    suite: str = "bookworm"
    packages: tuple[str, ...] = ("python3", "python3-pip", "python-is-python3", "ca-certificates")
    # Documentation, manual pages and translations are never read in a container.
    dpkg_options: tuple[str, ...] = (
        "path-exclude=/usr/share/man/*",
        "path-exclude=/usr/share/doc/*",
        "path-include=/usr/share/doc/*/copyright",
        "path-exclude=/usr/share/locale/*",
        "path-exclude=/usr/share/info/*",
    )
    hooks: tuple[str, ...] = (
        # Dockerfile.cni bundles the interpreter it finds at the official image's path.
        'ln -sf /usr/bin/python3.11 "$1/usr/local/bin/python3.11"',
        # Debian's pip refuses installs into the system Python (PEP 668); the image is that system.
        'rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED',
    )
    env: tuple[str, ...] = (
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG=C.UTF-8",
    )

    cmd: str = "python3"

    def key(self) -> str:
        """Over the commands that make the base, so that changing any of them rebuilds it."""
        made = {"mmdebstrap": self.mmdebstrap_args(Path("rootfs.tar")), "env": self.env, "cmd": self.cmd}
        return digest({"recipe": RECIPE_VERSION, "base": made})

    def reference(self) -> str:
        return f"localhost/auto-sriov/python-base:{self.key()}"

    def mmdebstrap_args(self, out: Path) -> list[str]:
        return [
            "mmdebstrap",
            "--variant=minbase",
            "--format=tar",
            "--include=" + ",".join(self.packages),
            *(f"--dpkgopt={o}" for o in self.dpkg_options),
            *(f"--customize-hook={h}" for h in self.hooks),
            self.suite,
            str(out),
        ]


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def instructions(text: str) -> Iterator[tuple[str, list[str]]]:
    """(KEYWORD, words) per Dockerfile instruction, continuation lines joined, comments dropped."""
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        words = (pending + line).split()
        pending = ""
        yield words[0].upper(), words[1:]


def copy_sources(dockerfile_text: str) -> list[str]:
    """Every context path a COPY or ADD takes (those from another stage take nothing from it)."""
    sources: list[str] = []
    for keyword, words in instructions(dockerfile_text):
        if keyword not in {"COPY", "ADD"}:
            continue
        flags = [w for w in words if w.startswith("--")]
        args = [w for w in words if not w.startswith("--")]
        if any(f.startswith("--from=") for f in flags):
            continue
        if args and args[0].startswith("["):
            raise ValueError(f"JSON-form {keyword} is not understood here: {' '.join(words)}")
        sources += args[:-1]
    return sources


def ignore_patterns(text: str) -> list[str]:
    patterns = [p.strip() for p in text.splitlines() if p.strip() and not p.strip().startswith("#")]
    for p in patterns:
        # Re-inclusion would need the full .dockerignore semantics; refuse rather than hash wrongly.
        if p.startswith("!"):
            raise ValueError(f"negated ignore pattern {p!r} is not supported by the image cache key")
    return patterns


def is_ignored(rel: PurePosixPath, patterns: Sequence[str]) -> bool:
    """Whether the build context leaves ``rel`` (or a directory above it) out."""
    for depth in range(1, len(rel.parts) + 1):
        prefix = PurePosixPath(*rel.parts[:depth])
        for pattern in patterns:
            if pattern.startswith("**/"):
                if fnmatch.fnmatchcase(prefix.name, pattern[3:]):
                    return True
            elif fnmatch.fnmatchcase(str(prefix), pattern.rstrip("/")):
                return True
    return False


def context_files(root: Path, sources: Sequence[str], patterns: Sequence[str]) -> list[PurePosixPath]:
    out: set[PurePosixPath] = set()
    for source in sources:
        top = root / source
        if not top.exists():
            raise FileNotFoundError(f"COPY source {source} is not in {root}")
        paths = [top] if not top.is_dir() else [p for p in top.rglob("*") if not p.is_dir()]
        for path in paths:
            rel = PurePosixPath(path.relative_to(root).as_posix())
            if not is_ignored(rel, patterns):
                out.add(rel)
    return sorted(out)


def file_entry(root: Path, rel: PurePosixPath) -> list[str]:
    path = root / rel
    if path.is_symlink():
        return [str(rel), "link", os.readlink(path)]
    mode = "x" if os.access(path, os.X_OK) else "-"
    return [str(rel), mode, hashlib.sha256(path.read_bytes()).hexdigest()]


def image_key(root: Path, product: Product, base: BaseRecipe, reference: str) -> str:
    dockerfile = (root / product.dockerfile).read_text()
    ignore = (root / product.ignorefile).read_text()
    files = context_files(root, copy_sources(dockerfile), ignore_patterns(ignore))
    return digest(
        {
            "recipe": RECIPE_VERSION,
            "base": base.key(),
            "dockerfile": dockerfile,
            "ignore": ignore,
            "reference": reference,
            "files": [file_entry(root, f) for f in files],
        }
    )


def manifest_references(kustomization: Path = KUSTOMIZATION) -> dict[str, str]:
    """image name's last part -> name:tag, as the kustomization's images list pins them."""
    images = yaml.safe_load(kustomization.read_text())["images"]
    return {i["name"].rsplit("/", 1)[1]: f"{i['name']}:{i['newTag']}" for i in images}


def cache_root() -> Path:
    explicit = os.environ.get("AUTO_SRIOV_IMAGES_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "auto-sriov-images"


def say(line: str, end: str = "\n") -> None:
    print(f"[build-images] {line}" if line else "", end=end, file=sys.stderr, flush=True)


def run(argv: Sequence[str], log: Path) -> str:
    """Run one build step with its output appended to ``log``; its stdout's last line is returned."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=out, text=True, check=False)
        out.write(done.stdout)
    if done.returncode != 0:
        raise BuildFailed(f"{argv[0]} {argv[1]} exited {done.returncode}")
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else ""


def buildah(*args: str) -> subprocess.CompletedProcess[str]:
    """A buildah query or clean-up whose failure the caller reads from the return code."""
    return subprocess.run(["buildah", *args], capture_output=True, text=True, check=False)


class BuildFailed(Exception):
    pass


def failure_reason(step: str, log: Path) -> str:
    """The step that failed and the log lines most likely to say why, for .failed and skip reasons."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []
    telling = [ln for ln in lines if re.search(r"error|denied|not found|no such|cannot|failed", ln, re.I)]
    return f"{step}: {' '.join((telling or lines)[-3:])} (full log: {log})"


def fresh(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in (".complete", ".failed", "build.log"):
        (directory / name).unlink(missing_ok=True)
    return directory / "build.log"


def ensure_base(base: BaseRecipe, cache: Path) -> None:
    """The base in buildah's storage, from the cached rootfs when there is one (seconds), else from
    mmdebstrap (tens of seconds)."""
    reference = base.reference()
    if buildah("inspect", "--type", "image", reference).returncode == 0:
        say(f"python base ({base.suite}): cached ({reference})")
        return
    directory = cache / f"python-base-{base.key()}"
    rootfs = directory / "rootfs.tar"
    started = time.monotonic()
    had_rootfs = (directory / ".complete").is_file() and rootfs.is_file()
    say(f"python base ({base.suite}, mmdebstrap {' '.join(base.packages)}): building... ", end="")
    log = fresh(directory) if not had_rootfs else directory / "build.log"
    try:
        if not had_rootfs:
            # mmdebstrap picks its output format from the name's extension.
            partial = directory / "rootfs.partial.tar"
            run([*base.mmdebstrap_args(partial)], log)
            partial.rename(rootfs)
        bootstrap = time.monotonic() - started
        container = run(["buildah", "from", "scratch"], log)
        try:
            run(["buildah", "add", "--quiet", container, str(rootfs), "/"], log)
            env = [w for e in base.env for w in ("--env", e)]
            run(["buildah", "config", *env, "--cmd", base.cmd, container], log)
            run(["buildah", "commit", "--quiet", container, reference], log)
        finally:
            buildah("rm", container)
    except (BuildFailed, OSError) as exc:
        (directory / ".failed").write_text(failure_reason(str(exc), log) + "\n")
        print(f"FAILED ({exc}); log: {log}", file=sys.stderr)
        raise
    total = time.monotonic() - started
    (directory / ".complete").write_text(f"rootfs by mmdebstrap; base image {reference}\n")
    drop_other_bases(reference)
    prune(cache, "python-base", directory)
    how = "rootfs cached" if had_rootfs else f"mmdebstrap {bootstrap:.1f} s"
    print(f"built in {total:.1f} s ({how}; {rootfs.stat().st_size // 2**20} MB rootfs)", file=sys.stderr)


def mounts() -> list[str]:
    """The host's CA bundle and pip configuration for the RUN steps' pip: where the package index is
    reached only through a proxy, its CA is in the host's bundle, not the base's."""
    bundle = (
        os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
    )
    pairs = [(bundle, "/etc/ssl/certs/ca-certificates.crt"), ("/etc/pip.conf", "/etc/pip.conf")]
    return [f"--volume={src}:{dst}:ro" for src, dst in pairs if Path(src).is_file()]


def image_id(reference: str) -> str | None:
    done = buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", reference)
    return done.stdout.strip() if done.returncode == 0 else None


def drop_if_dangling(old_id: str | None, new_id: str | None) -> None:
    """The image the tag pointed to before, once the rebuild left it without any name."""
    if not old_id or old_id == new_id:
        return
    listed = buildah("images", "--all", "--json")
    if listed.returncode != 0:
        return
    for image in json.loads(listed.stdout or "[]"):
        if old_id.startswith(image["id"]) and not image.get("names"):
            buildah("rmi", old_id)


def drop_other_bases(reference: str) -> None:
    """Earlier recipes' bases: the products built on them are in their archives already."""
    repository = reference.rsplit(":", 1)[0]
    listed = buildah("images", "--json")
    for image in json.loads(listed.stdout or "[]") if listed.returncode == 0 else []:
        for name in image.get("names") or []:
            if name.startswith(f"{repository}:") and name != reference:
                buildah("rmi", name)


def build_product(product: Product, reference: str, base: BaseRecipe, directory: Path) -> None:
    log = fresh(directory)
    started = time.monotonic()
    say(f"{product.name} ({reference}): building... ", end="")
    old_id = image_id(reference)
    archive = directory / "image.oci.tar"
    try:
        run(
            [
                "buildah",
                "bud",
                "--isolation=chroot",
                "--pull=never",
                "--layers=false",
                f"--file={product.dockerfile}",
                f"--ignorefile={product.ignorefile}",
                f"--build-arg=PYTHON_IMAGE={base.reference()}",
                *mounts(),
                f"--tag={reference}",
                str(REPO_ROOT),
            ],
            log,
        )
        partial = directory / "image.oci.tar.partial"
        partial.unlink(missing_ok=True)
        run(["buildah", "push", "--quiet", reference, f"oci-archive:{partial}:{reference}"], log)
        partial.rename(archive)
    except (BuildFailed, OSError) as exc:
        (directory / ".failed").write_text(failure_reason(str(exc), log) + "\n")
        print(f"FAILED after {time.monotonic() - started:.1f} s; last lines of {log}:", file=sys.stderr)
        for line in log.read_text(errors="replace").splitlines()[-15:]:
            print(f"    {line}", file=sys.stderr)
        raise
    new_id = image_id(reference)
    drop_if_dangling(old_id, new_id)
    secs = time.monotonic() - started
    size = archive.stat().st_size // 2**20
    (directory / "reference").write_text(reference + "\n")
    (directory / ".complete").write_text(f"built in {secs:.0f} s; image {new_id}; archive {size} MB\n")
    print(f"built in {secs:.1f} s ({size} MB archive; log: {log})", file=sys.stderr)


def prune(cache: Path, name: str, keep: Path) -> None:
    """Keep the newest KEEP complete builds of ``name`` (the current one always)."""
    keyed = re.compile(rf"{re.escape(name)}-[0-9a-f]{{16}}")
    builds = [
        d for d in cache.iterdir() if keyed.fullmatch(d.name) and d != keep and (d / ".complete").exists()
    ]
    builds.sort(key=lambda d: (d / ".complete").stat().st_mtime, reverse=True)
    for old in builds[KEEP - 1 :]:
        shutil.rmtree(old, ignore_errors=True)


def missing_tools() -> str | None:
    absent = [t for t in ("buildah", "mmdebstrap") if shutil.which(t) is None]
    return f"{' and '.join(absent)} not installed; run 'make deps'" if absent else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("images", nargs="*", help="default: all")
    parser.add_argument(
        "--print-dir", action="store_true", help="print name=directory per image, build nothing"
    )
    parser.add_argument("--tag", help="tag instead of the manifests' (deploy/base/kustomization.yaml newTag)")
    args = parser.parse_args(argv)
    products = [p for p in PRODUCTS if not args.images or p.name in args.images]
    unknown = set(args.images) - {p.name for p in PRODUCTS}
    if unknown:
        parser.error(f"unknown image(s) {sorted(unknown)}; known: {[p.name for p in PRODUCTS]}")
    base = BaseRecipe()
    cache = cache_root()
    references = manifest_references()
    if args.tag:
        references = {n: f"{r.rsplit(':', 1)[0]}:{args.tag}" for n, r in references.items()}
    planned = [
        (p, references[p.name], cache / f"{p.name}-{image_key(REPO_ROOT, p, base, references[p.name])}")
        for p in products
    ]
    if args.print_dir:
        for product, _, directory in planned:
            print(f"{product.name}={directory}")
        return 0
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:
        # One build at a time per cache: buildah storage and the archives are shared.
        fcntl.flock(lock, fcntl.LOCK_EX)
        return build_all(planned, base, cache)


def build_all(planned: Sequence[tuple[Product, str, Path]], base: BaseRecipe, cache: Path) -> int:
    todo = []
    for product, reference, directory in planned:
        if (directory / ".complete").is_file() and (directory / "image.oci.tar").is_file():
            say(f"{product.name} ({reference}): cached ({directory}/image.oci.tar)")
        else:
            todo.append((product, reference, directory))
    if not todo:
        return 0
    absent = missing_tools()
    try:
        if absent:
            raise BuildFailed(absent)
        ensure_base(base, cache)
    except (BuildFailed, OSError) as exc:
        for product, _, directory in todo:
            fresh(directory)
            (directory / ".failed").write_text(f"no base image to build {product.name} on: {exc}\n")
        say(f"cannot build {', '.join(p.name for p, _, _ in todo)}: {exc}")
        return 1
    rc = 0
    for product, reference, directory in todo:
        try:
            build_product(product, reference, base, directory)
            prune(cache, product.name, directory)
        except (BuildFailed, OSError):
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
