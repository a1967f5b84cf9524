"""Where the Go-built third-party tools live, and whether each one is usable.

``scripts/build-tools`` owns the cache layout; we ask it (``--print-dir``) instead of guessing, so a
version bump in ``scripts/versions.env`` is seen here without a code change. A build is usable
only once it left its ``.complete`` stamp; a ``.failed`` file carries the reason it is not.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NoReturn

from sriov_contract.errors import ReasonedError

REPO_ROOT = Path(__file__).resolve().parents[1]
BUILD_TOOLS = REPO_ROOT / "scripts" / "build-tools"
COMPONENTS = (
    "k8s",
    "etcd",
    "cnitool",
    "plugins",
    "whereabouts",
    "multus",
    "kubelet",
    "containerd",
    "runc",
    "pause",
    "crictl",
    "helm",
    "kubectl",
)


class ToolUnavailable(ReasonedError):
    """A third-party tool the caller needs is not built (or its build failed)."""


@dataclass(frozen=True)
class ToolStatus:
    component: str
    directory: Path
    usable: bool
    reason: str


def parse_print_dir(output: str) -> dict[str, Path]:
    """Parse ``component=dir`` lines from ``build-tools --print-dir``."""
    dirs: dict[str, Path] = {}
    for line in output.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip():
            dirs[name.strip()] = Path(value.strip())
    return dirs


def status_of(component: str, directory: Path) -> ToolStatus:
    if (directory / ".complete").is_file():
        return ToolStatus(component, directory, True, "")
    failed = directory / ".failed"
    if failed.is_file():
        detail = failed.read_text(errors="replace").strip() or "no detail recorded"
        reason = f"{component} failed to build ({detail}); fix it and rerun 'make tools'"
    else:
        reason = f"{component} is not built ({directory}/.complete is missing); run 'make tools'"
    return ToolStatus(component, directory, False, reason)


def _raise(err: ToolUnavailable) -> NoReturn:
    raise err


class ToolSet:
    """Resolves tool directories; what happens on a missing tool is the caller's choice.

    Library code raises ``ToolUnavailable``; pytest fixtures pass an ``on_missing`` that skips the
    test with the exact reason instead.
    """

    def __init__(self, on_missing: Callable[[ToolUnavailable], NoReturn] = _raise) -> None:
        self._on_missing = on_missing

    @cached_property
    def directories(self) -> dict[str, Path]:
        out = subprocess.run(
            ["bash", str(BUILD_TOOLS), "--print-dir", *COMPONENTS],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            raise ToolUnavailable(
                "ToolCacheUnknown",
                f"{BUILD_TOOLS} --print-dir failed ({out.stderr.strip()}); check scripts/versions.env",
            )
        return parse_print_dir(out.stdout)

    def status(self, component: str) -> ToolStatus:
        directory = self.directories.get(component)
        if directory is None:
            raise ToolUnavailable(
                "UnknownTool", f"no tool component {component!r}; known: {', '.join(COMPONENTS)}"
            )
        return status_of(component, directory)

    def require(self, component: str) -> Path:
        st = self.status(component)
        if not st.usable:
            self._on_missing(ToolUnavailable("ToolNotBuilt", st.reason, component=component))
        return st.directory

    def binary(self, component: str, name: str) -> Path:
        path = self.require(component) / name
        if not path.is_file():
            self._on_missing(
                ToolUnavailable(
                    "ToolNotBuilt",
                    f"{component} build is marked complete but {path} is missing; delete "
                    f"{path.parent}/.complete and rerun 'make tools'",
                    component=component,
                )
            )
        return path
