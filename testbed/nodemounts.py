"""A real node's own view of the host's filesystem: one mount namespace per node in which the paths
the shipped DaemonSets name (``/var/lib/kubelet``, ``/etc/cni/net.d``, ``/opt/cni/bin``,
``/run/cni-shim``, ...) are bind mounts of that node's directories under the bed's run directory.

Two nodes of the bed run on one host. The DaemonSets' hostPath volumes are the same on every node,
so without this both nodes' driver Pods would share one kubelet plugin directory and one
checkpoint. containerd and the kubelet of a node are started inside its namespace (``enter``),
so every container they create resolves hostPath volumes there, exactly as on a machine of its
own. The bed's host-side code keeps using the directories themselves (the bind sources).

Propagation: the namespace starts as a copy of the host's (``--propagation unchanged``), so the
host's shared ``/run/netns`` stays one peer group with it: a Pod sandbox's network namespace that
containerd pins there is visible to the host's tests too. Everything else is made shared inside
the namespace (``--make-rshared /``) because the CRI accepts ``mountPropagation: HostToContainer``
only from a shared or slave mount. The namespace lives as long as a holder process (``sleep``);
when it and the node's processes are gone the kernel drops every mount in it, so stopping leaves
only the mount points this created on the host, which ``stop`` removes again.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from sriov_contract.errors import ReasonedError
from testbed import processes
from testbed.processes import ProcessRecord, launch, log_tail
from testbed.waiting import WaitTimeout, wait_for

READY = "node mounts ready"


class NodeMountsError(ReasonedError):
    """The node's mount namespace could not be set up."""


class NodeMounts:
    """``binds``: path as the node's processes see it -> the node's directory that backs it."""

    def __init__(self, binds: Mapping[Path, Path], log: Path) -> None:
        self.binds = dict(binds)
        self.log = log
        self.holder: ProcessRecord | None = None
        self._created: list[Path] = []

    def start(self) -> None:
        lines = ["set -e", "mount --make-rshared /"]
        for target, source in self.binds.items():
            source.mkdir(parents=True, exist_ok=True)
            self._make_mount_point(target)
            lines.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(target))}")
        lines += [f"echo {shlex.quote(READY)}", "exec sleep infinity"]
        argv = ["unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-c", "\n".join(lines)]
        proc, self.holder = launch("node-mounts", argv, self.log, cwd=self.log.parent, die_with_parent=True)

        def ready() -> bool:
            if proc.poll() is not None:
                raise NodeMountsError("NodeMountsFailed", f"the node's mounts failed: {log_tail(self.log)}")
            return READY in self.log.read_text(errors="replace")

        try:
            wait_for(ready, 15, what="the node's mount namespace", interval=0.05)
        except WaitTimeout as exc:
            raise NodeMountsError("NodeMountsFailed", f"{exc.message}: {log_tail(self.log)}") from None

    def _make_mount_point(self, target: Path) -> None:
        """Create ``target`` on the host if missing, remembering the topmost directory made."""
        missing = [p for p in (target, *target.parents) if not p.exists()]
        target.mkdir(parents=True, exist_ok=True)
        if missing:
            self._created.append(missing[-1])

    def enter(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the node's mount namespace."""
        assert self.holder is not None, "NodeMounts.start() first"
        return ["nsenter", f"--mount=/proc/{self.holder.pid}/ns/mnt", "--", *argv]

    def stop(self) -> None:
        if self.holder is not None:
            processes.stop([self.holder], grace=2)
            self.holder = None
        for top in reversed(self._created):
            # Only empty directories: what a node wrote went to its own directories, not here.
            for directory in sorted((p for p in (top, *top.rglob("*")) if p.is_dir()), reverse=True):
                with contextlib.suppress(OSError):
                    directory.rmdir()
        self._created = []
