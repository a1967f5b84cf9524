"""Crash-safe file replacement shared by the driver checkpoint and the CNI delegate cache.

Both promise that a crash leaves either the old or the new document, never a truncated one, so
the write goes to a private temp file that is renamed over the target. By default the temp file
and the directory entry are fsynced too, so the promise also holds across a power cut; a caller
whose documents cannot outlive a reboot anyway may opt out (see cni_shim.node.cache). Standard library
only: the CNI hot path uses it.
"""

from __future__ import annotations

import os


def atomic_write(
    path: str | os.PathLike[str], data: bytes, mode: int = 0o600, *, durable: bool = True
) -> None:
    """Replace `path` with `data` atomically; the parent directory must exist.

    With `durable` (the default) the new document also survives a power cut; without it, a
    killed process still leaves the old or the new document, but a kernel crash or power cut
    may lose the replacement.
    """
    final = os.fspath(path)
    directory = os.path.dirname(final) or "."
    tmp = os.path.join(directory, f".{os.path.basename(final)}.tmp.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    if durable:
        fsync_directory(directory)


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make the directory's entries (a rename, a new link) survive a power cut."""
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
