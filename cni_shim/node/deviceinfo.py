"""Device-info files (cni_shim.ports.DeviceInfoFiles) as the NAD client handles them: created
read-only (0444) and never over an existing file, their directory made first; removal tolerates
a file that is already gone."""

from __future__ import annotations

import os


class NodeDeviceInfoFiles:
    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as fh:
                return fh.read()
        except OSError:
            return None

    def create(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def remove(self, path: str) -> None:
        try:  # noqa: SIM105 - contextlib would cost every thin start an import
            os.remove(path)
        except FileNotFoundError:
            pass
