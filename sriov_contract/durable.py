"""Crash-safe file replacement shared by the driver checkpoint and the CNI delegate cache.

Both promise that a crash or power cut leaves either the old or the new document, never a
truncated one, so the write goes to a private temp file that is fsynced, renamed over the
target, and the directory entry is fsynced too. Standard library only: the CNI hot path uses it.
"""

from __future__ import annotations

import os


def atomic_write(path: str | os.PathLike[str], data: bytes, mode: int = 0o600) -> None:
    """Durably replace `path` with `data`; the parent directory must exist."""
    final = os.fspath(path)
    directory = os.path.dirname(final) or "."
    tmp = os.path.join(directory, f".{os.path.basename(final)}.tmp.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
