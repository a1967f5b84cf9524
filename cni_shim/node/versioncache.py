"""The daemon remembers each delegate binary's VERSION answer until the binary is replaced.

Every ADD asks its delegates which CNI versions they speak; in a long-lived daemon that is one
extra process per plugin type per ADD for an answer that only changes with the file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence

from cni_shim.node.execution import find_plugin

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.ports import Executor

MAX_ENTRIES = 256


class VersionCache:
    def __init__(self, inner: Executor, root: str = "") -> None:
        self._inner = inner
        self._root = root.rstrip("/")
        self._lock = threading.Lock()
        self._answers: dict[tuple[object, ...], bytes] = {}

    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        if env.get("CNI_COMMAND") != "VERSION":
            return self._inner.execute(plugin, search_path, env, stdin)
        path = find_plugin(plugin, [self._root + d for d in search_path if d])
        st = os.stat(path)
        key = (path, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, stdin)
        with self._lock:
            known = self._answers.get(key)
        if known is not None:
            return known
        answer = self._inner.execute(plugin, search_path, env, stdin)
        with self._lock:
            if len(self._answers) >= MAX_ENTRIES:
                self._answers.clear()
            self._answers[key] = answer
        return answer
