"""The daemon's arena cap on the real C library: threads allocating at once share ARENA_MAX arenas."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cni_shim.node import allocator

# A child process (the cap is process-wide and cannot be undone): THREADS threads each make their
# first allocation while all are alive, then, with all still alive, glibc's malloc_info counts the arenas.
PROBE = """
import ctypes, json, sys, tempfile, threading
from cni_shim.node import allocator
env = json.loads(sys.argv[1])
cap = allocator.cap_arenas(env)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
THREADS = 8
alive = threading.Barrier(THREADS + 1)
allocated = threading.Barrier(THREADS + 1)
done = threading.Event()
def work():
    alive.wait()
    libc.malloc(4000)
    allocated.wait()
    done.wait()
threads = [threading.Thread(target=work) for _ in range(THREADS)]
for t in threads:
    t.start()
alive.wait()
allocated.wait()
with tempfile.NamedTemporaryFile() as out:
    fp = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, fp)
    libc.fclose(fp)
    print(json.dumps([cap, open(out.name).read().count("<heap nr=")]))
done.set()
for t in threads:
    t.join()
"""


def arenas_after_threads(env: dict[str, str]) -> tuple[int | None, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(env)], capture_output=True, text=True, check=True
    ).stdout
    cap, heaps = json.loads(out)
    return cap, heaps


glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")


@glibc
def test_the_cap_holds_threads_that_allocate_at_once_to_arena_max_arenas():
    assert arenas_after_threads({}) == (allocator.ARENA_MAX, allocator.ARENA_MAX)


@glibc
@pytest.mark.parametrize("env", [{"MALLOC_ARENA_MAX": "4"}, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"}])
def test_an_operators_own_setting_is_left_alone(env):
    cap, heaps = arenas_after_threads(env)
    # The child's environment is ours, not `env`: it shows the uncapped default, one arena per thread.
    assert cap is None
    assert heaps > allocator.ARENA_MAX
