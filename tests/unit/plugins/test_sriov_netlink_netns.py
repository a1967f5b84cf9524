"""The sriov test plugin's netlink adapter on a netns path that is gone (a sandbox torn down while
its ADD or DEL still runs): it must fail or report the link absent, and never make a netns there
nor bind-mount the runtime's netns directory onto itself (which hid containerd's other netns
mounts in the soak, so their Pods never finished terminating)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from plugins.sriov.netlink import Netlink

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="netns operations need root")


def _mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path) for line in Path("/proc/self/mountinfo").read_text().splitlines())


def test_a_vanished_netns_is_neither_created_nor_its_directory_mounted(tmp_path: Path) -> None:
    gone = tmp_path / "cni-gone"
    links = Netlink()
    with pytest.raises(FileNotFoundError):
        links.has_link(str(gone), "dra0")
    assert links.release(str(gone), "dra0", "ens1f0v0", "02:00:00:00:00:01", 1500) is False
    assert not gone.exists()
    assert not _mounted(tmp_path) and not _mounted(gone)
