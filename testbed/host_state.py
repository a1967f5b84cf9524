"""What a real node (testbed/realnode.py) changes on the host, and how its teardown finds and puts
back each: the kubelet's sysctls, its cgroup subtree, the mounts under its directories, and the
containerd shims of one containerd."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterable, Mapping
from pathlib import Path

# The kubelet's kernel tunables (pkg/kubelet/cm setupKernelTunables) plus the keyring limits it
# raises; all are host-wide, so the first value seen is put back at teardown.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
CGROUP_V1_ROOT = Path("/sys/fs/cgroup")


def read_sysctls() -> dict[str, str]:
    out = {}
    for name in KUBELET_SYSCTLS:
        with contextlib.suppress(OSError):
            out[name] = (Path("/proc/sys") / name).read_text().strip()
    return out


def restore_sysctls(saved: Mapping[str, str]) -> list[str]:
    restored = []
    for name, value in saved.items():
        path = Path("/proc/sys") / name
        with contextlib.suppress(OSError):
            if path.read_text().strip() != value:
                path.write_text(value)
                restored.append(f"{name.replace('/', '.')}={value}")
    return restored


def cgroup_hierarchies() -> list[Path]:
    if (CGROUP_V1_ROOT / "cgroup.controllers").is_file():
        return [CGROUP_V1_ROOT]  # unified (v2)
    return sorted(p for p in CGROUP_V1_ROOT.iterdir() if p.is_dir() and not p.is_symlink())


def _cgroup_dirs(root: Path) -> list[Path]:
    """`root` and every cgroup under it. A walk that tolerates directories vanishing under it: runc
    removes a container's cgroup while a node's processes die, and a rglob then fails."""
    return [Path(top) for top, _, _ in os.walk(root)]


def remove_cgroup_tree(root: Path) -> list[str]:
    """rmdir bottom-up (cgroup dirs cannot be removed recursively); returns what could not go."""
    if not root.is_dir():
        return []
    left = []
    for path in sorted(_cgroup_dirs(root), key=lambda p: -len(p.parts)):
        try:
            path.rmdir()
        except FileNotFoundError:
            pass  # gone meanwhile: what was wanted
        except OSError:
            left.append(str(path))
    return left


def cgroup_pids(cgroup_root: str) -> list[int]:
    """Every process in the cgroup tree ``cgroup_root`` (e.g. a kubelet's --cgroup-root), in any
    hierarchy: a node's containers, whoever their parent was."""
    pids: set[int] = set()
    for hierarchy in cgroup_hierarchies() if CGROUP_V1_ROOT.is_dir() else []:
        root = hierarchy / cgroup_root.lstrip("/")
        if not root.is_dir():
            continue
        for directory in _cgroup_dirs(root):
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(line) for line in (directory / "cgroup.procs").read_text().split())
    return sorted(pids)


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (proc / "stat").read_text()
                ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
                out.setdefault(ppid, []).append(int(proc.name))
    return out


def kill_trees(roots: Iterable[int]) -> list[int]:
    """SIGKILL these processes and all their descendants at once, as a power loss would: each is
    stopped first (a stopped process forks no child the listing could miss), then all are killed.
    Returns the PIDs killed."""
    stopped: set[int] = set()
    wanted = set(roots)
    while True:
        children = _children()
        tree = set(wanted)
        todo = list(wanted | stopped)
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in tree:
                    tree.add(child)
                    todo.append(child)
        new = tree - stopped
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= new
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return sorted(stopped)


def empty_dir(directory: Path) -> int:
    """Remove everything in ``directory`` (which stays, as a tmpfs's mount point would); returns
    how many entries went."""
    entries = list(directory.iterdir()) if directory.is_dir() else []
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return len(entries)


def mounts_under(prefix: Path) -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4].replace("\\040", " ")
        if mount_point == str(prefix) or mount_point.startswith(str(prefix) + "/"):
            out.append(mount_point)
    return out


def pids_with(binary: Path, needle: str) -> list[int]:
    """Live processes running ``binary`` whose command line contains ``needle``: the shims that
    serve one containerd (their ``-address`` names its socket), never anyone else's."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(proc / "exe") == str(binary) and needle in (proc / "cmdline").read_text():
                pids.append(int(proc.name))
    return pids
