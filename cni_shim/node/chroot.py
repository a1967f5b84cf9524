"""Run delegates inside the host's root (daemon `chrootDir`), as Multus's thick daemon does.

Plugins then see the host's files (IPAM state, device info, sriov-cni's cache), not the daemon
container's. The chroot happens in the `chroot` command rather than in a pre-exec hook, which
is unsafe in a threaded server.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence

from cni_shim.node.execution import find_plugin, run_plugin


class ChrootExecutor:
    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        # Resolved with the daemon's PATH: delegates get the request's environment, which may have none.
        self._chroot = shutil.which("chroot") or "/usr/sbin/chroot"

    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        found = find_plugin(plugin, [self.root + d for d in search_path if d.startswith("/")])
        return run_plugin([self._chroot, self.root, found[len(self.root) :]], plugin, env, stdin)
