"""Each delegate binary's VERSION answer, remembered until the binary is replaced.

Every ADD asks its delegates which CNI versions they speak: one extra process per plugin type per
ADD for an answer that only changes with the file. The daemon keeps the answers in memory
(VersionCache); a thin invocation is a fresh process, so it keeps them as files under cniDir
(FileVersionCache). Either way the key is the binary's identity (path, device, inode, mtime,
size) with the request, so an upgraded plugin, which is a new file, is asked again.
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Mapping, Sequence

from cni_shim.node.execution import find_plugin
from sriov_lib.durable import atomic_write

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.ports import Executor

MAX_ENTRIES = 256


def _identity(plugin: str, search_path: Sequence[str], root: str) -> tuple[str, os.stat_result]:
    path = find_plugin(plugin, [root + d for d in search_path if d])
    return path, os.stat(path)


class VersionCache:
    def __init__(self, inner: Executor, root: str = "") -> None:
        import threading  # noqa: PLC0415 - the daemon's request threads share it; thin mode never builds one

        self._inner = inner
        self._root = root.rstrip("/")
        self._lock = threading.Lock()
        self._answers: dict[tuple[object, ...], bytes] = {}

    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        if env.get("CNI_COMMAND") != "VERSION":
            return self._inner.execute(plugin, search_path, env, stdin)
        path, st = _identity(plugin, search_path, self._root)
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


class FileVersionCache:
    """Thin mode's: one small file per binary and request in `directory`. Only an optimisation:
    an unreadable or unwritable directory means the plugin is asked, as without the cache."""

    def __init__(self, inner: Executor, directory: str) -> None:
        self._inner = inner
        self._directory = directory

    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        if env.get("CNI_COMMAND") != "VERSION":
            return self._inner.execute(plugin, search_path, env, stdin)
        path, st = _identity(plugin, search_path, "")
        # The binary's identity in the name; the checksum only tells paths and requests apart.
        tag = binascii.crc32(path.encode() + b"\0" + stdin)
        name = f"{plugin}.{st.st_dev}.{st.st_ino}.{st.st_mtime_ns}.{st.st_size}.{tag:08x}"
        file = os.path.join(self._directory, name)
        try:
            with open(file, "rb") as fh:
                return fh.read()
        except OSError:
            pass
        answer = self._inner.execute(plugin, search_path, env, stdin)
        try:
            os.makedirs(self._directory, mode=0o700, exist_ok=True)
            atomic_write(file, answer, durable=False)
            # The answers of the binary this one replaced are never read again.
            for old in os.listdir(self._directory):
                if old != name and old.startswith(f"{plugin}.") and old.endswith(f".{tag:08x}"):
                    os.unlink(os.path.join(self._directory, old))
        except OSError:
            pass  # the next invocation asks the plugin again
        return answer
