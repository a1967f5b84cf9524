"""Device-info files on this node (cni_shim.ports.DeviceInfoFiles): a device plugin's, read, and
Multus's CNIDeviceInfoFile of an attachment, written and removed.

Written whole through a temporary file and a rename, so a reader never sees half a file and a
retried ADD simply replaces the same bytes (the NAD client's own save refuses an existing file,
which would make a retry fail); read-only as Multus leaves them.
"""

from __future__ import annotations

import os


class NodeDeviceInfoFiles:
    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError:
            return None

    def write(self, path: str, data: bytes) -> None:
        directory = os.path.dirname(path)
        os.makedirs(directory, mode=0o755, exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            try:  # noqa: SIM105 - contextlib.suppress would be one more import on every CNI start
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def remove(self, path: str) -> None:
        try:  # noqa: SIM105 - as above
            os.unlink(path)
        except FileNotFoundError:
            pass
