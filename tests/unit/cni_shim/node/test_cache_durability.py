"""The delegate cache is atomic but not fsynced; atomic_write's default (the driver checkpoint) still is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cni_shim.node.cache import FileCacheStore
from sriov_lib.durable import atomic_write


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def test_cache_writes_replace_atomically_without_fsync(tmp_path: Path, fsyncs: list[int]) -> None:
    store = FileCacheStore(str(tmp_path / "cni"))
    store.save_plan("c1", b"old plan")
    store.save_result("net-c1-eth0", b"old result")
    store.save_plan("c1", b"new plan")
    store.save_result("net-c1-eth0", b"new result")
    assert store.load_plan("c1") == b"new plan"
    assert store.load_result("net-c1-eth0") == b"new result"
    assert sorted(os.listdir(tmp_path / "cni")) == ["c1", "results"]
    assert os.listdir(tmp_path / "cni" / "results") == ["net-c1-eth0"]
    assert fsyncs == []


def test_atomic_write_is_durable_by_default(tmp_path: Path, fsyncs: list[int]) -> None:
    target = tmp_path / "checkpoint.json"
    atomic_write(target, b"{}")
    assert target.read_bytes() == b"{}"
    assert len(fsyncs) == 2  # the file, then its directory entry
    assert os.listdir(tmp_path) == ["checkpoint.json"]


def test_a_write_that_fails_leaves_the_old_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "doc"
    atomic_write(target, b"old", durable=False)

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        atomic_write(target, b"new", durable=False)
    assert target.read_bytes() == b"old"
