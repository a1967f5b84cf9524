"""The Helm chart and the kustomize install as objects, rendered by the real tools.

- ``helm`` / ``kubectl`` (session fixtures): the binaries ``scripts/build-tools`` built; a test that
  needs one skips with the reason its build left when it is missing.
- ``render_chart(helm, *sets)``: ``helm template`` of deploy/helm/auto-sriov with ``--set`` pairs.
- ``kustomize(kubectl, directory)``: ``kubectl kustomize`` of a kustomization directory.
- ``without_helm_labels(obj)``: the object less the labels only Helm adds.
- ``installed(objects)`` / ``hooks(objects)``: what ``helm install`` applies, and the hook objects
  Helm runs around it (the pre-delete uninstall check), which the kustomize install has no form of.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.deployment import DEPLOY_DIR
from testbed.tools import BUILD_TOOLS, parse_print_dir, status_of

CHART_DIR = DEPLOY_DIR / "helm" / "auto-sriov"
RELEASE = "auto-sriov"
# Helm's standard labels (templates/_helpers.tpl), on object metadata only.
HELM_LABELS = frozenset({"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"})


def built_tool(component: str, binary: str) -> Path:
    """The tool's binary, or a skip that quotes why it is not built."""
    out = subprocess.run(
        ["bash", str(BUILD_TOOLS), "--print-dir", component], capture_output=True, text=True, check=False
    )
    directory = parse_print_dir(out.stdout).get(component)
    if directory is None:
        pytest.skip(f"{BUILD_TOOLS} --print-dir {component} failed: {out.stderr.strip()}")
    status = status_of(component, directory)
    if not status.usable:
        pytest.skip(status.reason)
    return directory / binary


@pytest.fixture(scope="session")
def helm() -> Path:
    return built_tool("helm", "helm")


@pytest.fixture(scope="session")
def kubectl() -> Path:
    return built_tool("kubectl", "kubectl")


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, check=False)


def render_chart(helm: Path, *sets: str) -> list[dict[str, Any]]:
    flags = [f for s in sets for f in ("--set", s)]
    out = run_helm(helm, "template", RELEASE, str(CHART_DIR), *flags)
    assert out.returncode == 0, out.stderr
    return documents(out.stdout)


def kustomize(kubectl: Path, directory: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return documents(out.stdout)


HOOK_ANNOTATION = "helm.sh/hook"


def is_hook(obj: dict[str, Any]) -> bool:
    return HOOK_ANNOTATION in (obj["metadata"].get("annotations") or {})


def installed(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if not is_hook(o)]


def hooks(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if is_hook(o)]


def without_helm_labels(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    labels = out["metadata"].get("labels", {})
    for key in HELM_LABELS & labels.keys():
        del labels[key]
    return out
