"""glibc malloc tuning for the long-lived daemon: at most ARENA_MAX malloc arenas.

glibc gives threads their own arenas, up to 8 per core, and every arena keeps the chunks its
threads freed. The daemon serves each request on a fresh thread, so requests land on whichever
arena is free and each arena's free space fills up separately: over 10k ADD/DEL cycles the bytes
in use stayed flat while the free bytes held in arenas grew (bench.daemon_leak, mallinfo2). The
GIL serializes nearly all of the daemon's allocations anyway, so more arenas buy no parallelism.
This is what MALLOC_ARENA_MAX=2 does for other threaded CPython daemons; set in the process
itself, so every way of starting the daemon (DaemonSet, tests, bench) runs the measured setting.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping

ARENA_MAX = 2
M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
# An operator's explicit choice (environment, or glibc tunables) wins over ours.
_VARIABLE = "MALLOC_ARENA_MAX"
_TUNABLE = "glibc.malloc.arena_max"


def cap_arenas(env: Mapping[str, str], limit: int = ARENA_MAX) -> int | None:
    """Cap glibc's arenas at `limit`, before the daemon starts threads; returns the cap set.

    None when the environment already chose, or the C library has no such setting (musl's
    mallopt does nothing and says so)."""
    if _VARIABLE in env or _TUNABLE in env.get("GLIBC_TUNABLES", ""):
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return limit if mallopt(M_ARENA_MAX, limit) == 1 else None
