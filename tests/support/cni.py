"""CNI fixtures: a plugin bin dir, network namespaces, the two-rail fake node and plugin runners.

Fixtures: ``cni_bin_dir`` (session), ``netns`` (factory), ``fake_node`` (two-rail, per test),
``cni_data_dir`` (per test). Helpers: :func:`run_cni`, :func:`run_cnitool`, :func:`make_cni_bin_dir`.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.bed.fakenode import FakeNode

REPO = Path(__file__).resolve().parents[2]
TWO_RAIL = REPO / "fixtures/topologies/two-rail.yaml"
GO_PLUGINS = ("host-local", "static", "tuning", "host-device", "ptp", "loopback")
PY_PLUGINS = {"sriov": "plugins.sriov.__main__", "recorder": "plugins.recorder", "faulty": "plugins.faulty"}


def tool_dir(component: str) -> Path | None:
    """The built tool directory for ``component``, or None when it is not (yet) built."""
    out = subprocess.run(
        [str(REPO / "scripts/build-tools"), "--print-dir", component],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in out.splitlines():
        name, _, path = line.partition("=")
        if name == component and (Path(path) / ".complete").exists():
            return Path(path)
    return None


def make_cni_bin_dir(dest: Path) -> Path:
    """Fill ``dest`` with the Go plugins (symlinks) and wrappers for our Python test plugins."""
    dest.mkdir(parents=True, exist_ok=True)
    for component, names in (("plugins", GO_PLUGINS), ("whereabouts", ("whereabouts",))):
        directory = tool_dir(component)
        for name in names:
            if directory is not None and (directory / name).exists():
                (dest / name).unlink(missing_ok=True)
                (dest / name).symlink_to(directory / name)
    for name, module in PY_PLUGINS.items():
        wrapper = dest / name
        wrapper.write_text(f"#!{sys.executable}\nfrom {module} import main\n\nmain()\n")
        wrapper.chmod(0o755)
    return dest


@pytest.fixture(scope="session")
def cni_bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_cni_bin_dir(tmp_path_factory.mktemp("cni-bin"))


@pytest.fixture
def cni_data_dir(tmp_path: Path) -> Path:
    """A private sriov plugin data dir (cache, allocations, locks) for one test."""
    path = tmp_path / "sriov-data"
    path.mkdir()
    return path


@pytest.fixture
def netns() -> Iterator[Callable[[], str]]:
    """Factory: each call creates a fresh ``ip netns`` and returns its path; all deleted after."""
    created: list[str] = []

    def make() -> str:
        name = f"h4t-{secrets.token_hex(4)}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        created.append(name)
        return f"/run/netns/{name}"

    yield make
    for name in created:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def load_two_rail() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(TWO_RAIL.read_text())
    return data


@pytest.fixture
def fake_node(tmp_path: Path) -> Iterator[FakeNode]:
    """The two-rail fake node (spec 14.2), up for one test and torn down after."""
    node = FakeNode.up(load_two_rail(), tmp_path / "sys")
    try:
        yield node
    finally:
        node.down()


@dataclass(frozen=True)
class CniRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout) if self.stdout.strip() else None


def run_cni(
    plugin: str,
    command: str,
    conf: Mapping[str, Any] | bytes,
    *,
    bin_dir: Path,
    container_id: str = "",
    netns: str = "",
    ifname: str = "",
    cni_args: str = "",
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> CniRun:
    """Execute one plugin from ``bin_dir`` the way a runtime does (CNI_* env + config on stdin)."""
    full_env = {
        **os.environ,
        **(env or {}),
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container_id,
        "CNI_NETNS": netns,
        "CNI_IFNAME": ifname,
        "CNI_ARGS": cni_args,
        "CNI_PATH": str(bin_dir),
    }
    stdin = conf if isinstance(conf, bytes) else json.dumps(conf).encode()
    proc = subprocess.run(
        [str(bin_dir / plugin)], input=stdin, env=full_env, capture_output=True, timeout=timeout, check=False
    )
    return CniRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def run_cnitool(
    args: list[str],
    *,
    net_dir: Path,
    bin_dir: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> CniRun:
    """Run the real cnitool (``add|del|check <net> <netns path>``) against configs in ``net_dir``."""
    directory = tool_dir("cnitool")
    if directory is None:
        pytest.skip("cnitool is not built (scripts/build-tools cnitool)")
    full_env = {**os.environ, **(env or {}), "NETCONFPATH": str(net_dir), "CNI_PATH": str(bin_dir)}
    proc = subprocess.run(
        [str(directory / "cnitool"), *args], env=full_env, capture_output=True, timeout=timeout, check=False
    )
    return CniRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
