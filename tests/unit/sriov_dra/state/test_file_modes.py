"""Issue 31 item 6: the checkpoint and the CDI specs are readable by root only (the driver, the
`sriov-dra` CLI on the node and the container runtime all run as root), whatever the umask and
whatever mode an earlier file had."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sriov_dra.state.cdi import CdiDir
from sriov_dra.state.checkpoint import FileStorage

OWNER_ONLY = 0o600


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("permissive_umask")
def test_the_checkpoint_is_owner_only_even_over_a_world_readable_one(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text("{}")
    path.chmod(0o644)
    FileStorage(path).write(b'{"data":{}}')
    assert mode(path) == OWNER_ONLY
    assert path.read_bytes() == b'{"data":{}}'


@pytest.mark.usefixtures("permissive_umask")
def test_a_cdi_spec_is_owner_only(tmp_path: Path) -> None:
    cdi = CdiDir(tmp_path)
    cdi.write("uid-1", {"cdiVersion": "0.6.0", "kind": "k8s.sriovnetwork.k8snetworkplumbingwg.io/vf"})
    assert mode(cdi.path("uid-1")) == OWNER_ONLY
    assert [p.name for p in tmp_path.iterdir()] == [cdi.path("uid-1").name]  # no temp file left behind
