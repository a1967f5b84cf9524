"""What the daemon's API views are given in unit tests when their read counts do not matter."""

from __future__ import annotations


class Counts:
    """cni_shim.kube.views.Counts that counts nothing."""

    def live_read(self, kind: str) -> None:
        pass

    def cache_read(self, kind: str, *, hit: bool) -> None:
        pass
