"""CNI config files on this node, read as they are: confDir and clusterNetwork paths.

Which file holds which network, and what a bad one is called, is cni_shim.core.delegates's;
this module only lists directories and reads files (cni_shim.ports.ConfFiles).
"""

from __future__ import annotations

import os


class NodeConfFiles:
    def list_dir(self, directory: str) -> list[str]:
        return os.listdir(directory)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as fh:
            return fh.read()
