"""Fixtures around the fake kubelet (testbed/fake_kubelet.py).

``fake_kubelet_factory`` -> ``connect(registry_dir, timeout=10.0) -> FakeKubelet``;
``kubelet_dirs`` -> ``KubeletDirs(root, registry, plugins, cdi)`` under a short /tmp path (unix
socket paths are limited to 107 bytes, which pytest's tmp_path easily exceeds).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testbed.fake_kubelet import FakeKubelet, KubeletDirs, wait_for_socket


@pytest.fixture
def fake_kubelet_factory() -> Iterator[Any]:
    made: list[FakeKubelet] = []

    def connect(registry_dir: Path, timeout: float = 10.0) -> FakeKubelet:
        kubelet = FakeKubelet(wait_for_socket(registry_dir, "-reg.sock", timeout))
        made.append(kubelet)
        return kubelet

    yield connect
    # Each connection is closed even when closing another one failed.
    with contextlib.ExitStack() as close:
        for k in made:
            close.callback(k.close)


@pytest.fixture
def kubelet_dirs() -> Iterator[KubeletDirs]:
    root = Path(tempfile.mkdtemp(prefix="kl", dir="/tmp"))
    dirs = KubeletDirs(root, root / "plugins_registry", root / "plugins", root / "cdi")
    for d in (dirs.registry, dirs.plugins, dirs.cdi):
        d.mkdir()
    yield dirs
    shutil.rmtree(root, ignore_errors=True)
