"""What the bed's power loss (testbed/reboot.py) does on the host: a process tree dies at once,
children included, and a tmpfs-like directory is emptied but stays."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testbed import host_state, processes
from testbed.waiting import wait_for

# A parent that starts a child and a grandchild, then prints their PIDs and waits.
TREE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; g = subprocess.Popen(['sleep', '300']); print(g.pid, flush=True); time.sleep(300)"],
    stdout=subprocess.PIPE, text=True)
grandchild = child.stdout.readline().strip()
print(child.pid, grandchild, flush=True)
time.sleep(300)
"""


def test_kill_trees_kills_a_process_with_its_children_and_grandchildren() -> None:
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child, grandchild = (int(p) for p in parent.stdout.readline().split())
        killed = host_state.kill_trees([parent.pid])
        assert {parent.pid, child, grandchild} <= set(killed)
        parent.wait(10)
        wait_for(
            lambda: not processes.start_ticks(child) and not processes.start_ticks(grandchild),
            10,
            what="the child and grandchild gone",
        )
    finally:
        parent.kill()
        parent.wait()


def test_empty_dir_removes_every_entry_and_keeps_the_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_text("x")
    (tmp_path / "sock").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "sub")
    assert host_state.empty_dir(tmp_path) == 3
    assert tmp_path.is_dir() and not any(tmp_path.iterdir())
    assert host_state.empty_dir(tmp_path / "missing") == 0


def test_remove_cgroup_tree_goes_bottom_up_and_names_only_what_stayed(tmp_path: Path) -> None:
    root = tmp_path / "auto-sriov-node"
    (root / "kubepods" / "besteffort" / "pod1").mkdir(parents=True)
    (root / "kubepods" / "burstable").mkdir()
    busy = root / "system"
    busy.mkdir()
    (busy / "cgroup.procs").write_text("1\n")  # stands for a cgroup that still holds a process
    assert host_state.remove_cgroup_tree(root) == [str(busy), str(root)]
    assert sorted(p.name for p in root.iterdir()) == ["system"]
    (busy / "cgroup.procs").unlink()
    assert host_state.remove_cgroup_tree(root) == []
    assert not root.exists()
