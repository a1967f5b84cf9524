"""The process adapter: find a plugin binary on the search path and run it (CNI exec protocol).

Plugins start through os.posix_spawn (glibc's vfork-style clone) with three pipes served by one
poll loop, not through `subprocess`: that module's import is milliseconds of every thin
invocation, and its Popen/communicate machinery is most of the per-delegate overhead the
daemon adds to the plugin's own run time.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # typeshed has no stub for the C module
import errno
import os
import select
import sys
import time
from collections.abc import Mapping, Sequence

from cni_shim import reasons
from cni_shim.errors import CniError
from sriov_lib import quickjson

_BUSY_RETRIES = 5


def find_plugin(plugin: str, search_path: Sequence[str]) -> str:
    if not plugin:
        raise CniError(reasons.DELEGATE_NOT_FOUND, "no plugin name provided")
    if "/" in plugin or plugin in (".", ".."):
        raise CniError(reasons.DELEGATE_NOT_FOUND, f"invalid plugin name {plugin!r}: it must not contain '/'")
    dirs = [d for d in search_path if d]
    if not dirs:
        raise CniError(
            reasons.DELEGATE_NOT_FOUND, "no paths provided to find plugin binaries; set binDir or CNI_PATH"
        )
    for directory in dirs:
        candidate = os.path.join(directory, plugin)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise CniError(
        reasons.DELEGATE_NOT_FOUND,
        f'failed to find plugin "{plugin}" in path [{" ".join(dirs)}]; install it there or fix binDir/CNI_PATH',
    )


def plugin_failure(plugin: str, returncode: int, stdout: bytes, stderr: bytes) -> CniError:
    """libcni's error mapping: structured stdout keeps its code, anything else becomes 999."""
    text = stdout.strip()
    if text:
        try:
            doc = quickjson.loads(text)
            msg = str(doc["msg"])
            code = int(doc.get("code", 999))
        except (ValueError, KeyError, TypeError) as exc:
            return CniError(
                reasons.DELEGATE_FAILED,
                f"netplugin {plugin} failed but error parsing its diagnostic message {text[:500]!r}: {exc}",
            )
        details = str(doc.get("details") or "")
        failure = CniError(reasons.DELEGATE_FAILED, f"{msg}; {details}" if details else msg, code, details)
        failure.details["delegate_msg"] = msg  # the delegate's msg alone, for a pass-through answer
        return failure
    err = stderr.decode(errors="replace").strip()
    if err:
        return CniError(
            reasons.DELEGATE_FAILED, f'netplugin {plugin} failed: "{err[:2000]}": exit status {returncode}'
        )
    return CniError(
        reasons.DELEGATE_FAILED, f"netplugin {plugin} failed with no error message: exit status {returncode}"
    )


_READ = select.POLLIN | select.POLLHUP | select.POLLERR
# The C module's plain numbers: `signal` wraps them in an IntEnum, and `enum` would be one of a
# thin DEL's heaviest imports.
_DEFAULT_SIGNALS = (_signal.SIGPIPE, _signal.SIGXFSZ)
_CHUNK = 65536


def spawn(argv: Sequence[str], env: Mapping[str, str], stdin: bytes) -> tuple[int, bytes, bytes]:
    """Run argv to completion with `stdin` fed in; returns (exit status, stdout, stderr).

    The status is a negative signal number when a signal ended the process, as subprocess gives."""
    child_in, feed = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        # The pipes are close-on-exec; dup2 onto 0-2 gives the child exactly those three.
        actions = [
            (os.POSIX_SPAWN_DUP2, child_in, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
        ]
        start = os.posix_spawn if "/" in argv[0] else os.posix_spawnp
        # Python ignores SIGPIPE (and SIGXFSZ); the plugin gets the defaults, as subprocess restores them.
        pid = start(argv[0], list(argv), dict(env), file_actions=actions, setsigdef=_DEFAULT_SIGNALS)
    except BaseException:
        for fd in (feed, out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (child_in, out_w, err_w):
            os.close(fd)
    try:
        out, err = _communicate(feed, out_r, err_r, stdin)
    finally:
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out, err


def _communicate(feed: int, out_r: int, err_r: int, stdin: bytes) -> tuple[bytes, bytes]:
    """Write stdin and read both outputs at once, so a child that writes before it has read all of
    its input (or fills one pipe while we wait on the other) cannot deadlock against us."""
    reading: dict[int, list[bytes]] = {out_r: [], err_r: []}
    done: dict[int, bytes] = {}
    poller = select.poll()
    for fd in reading:
        poller.register(fd, _READ)
    pending = memoryview(stdin)
    if pending:
        os.set_blocking(feed, False)
        poller.register(feed, select.POLLOUT)
    else:
        os.close(feed)
        feed = -1
    try:
        while reading or feed >= 0:
            for fd, _event in poller.poll():
                if fd == feed:
                    try:
                        pending = pending[os.write(feed, pending[:_CHUNK]) :]
                    except BrokenPipeError:
                        pending = pending[:0]  # it stopped reading; what it answers still counts
                    if not pending:
                        poller.unregister(feed)
                        os.close(feed)
                        feed = -1
                elif data := os.read(fd, _CHUNK):
                    reading[fd].append(data)
                else:
                    poller.unregister(fd)
                    os.close(fd)
                    done[fd] = b"".join(reading.pop(fd))
    finally:
        for fd in [*reading, feed]:
            if fd >= 0:
                os.close(fd)
    return done[out_r], done[err_r]


def run_plugin(argv: Sequence[str], plugin: str, env: Mapping[str, str], stdin: bytes) -> bytes:
    """Execute a found plugin (argv[0] may be a wrapper such as chroot); its stderr passes through."""
    for attempt in range(_BUSY_RETRIES + 1):
        try:
            returncode, stdout, stderr = spawn(argv, env, stdin)
            break
        except OSError as exc:
            if exc.errno != errno.ETXTBSY or attempt == _BUSY_RETRIES:
                raise CniError(
                    reasons.DELEGATE_FAILED, f"cannot execute {' '.join(argv)}: {exc.strerror}"
                ) from exc
            time.sleep(1)
    if stderr:
        sys.stderr.buffer.write(stderr)
        sys.stderr.flush()
    if returncode != 0:
        raise plugin_failure(plugin, returncode, stdout, stderr)
    return stdout


class ProcessExecutor:
    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        return run_plugin([find_plugin(plugin, search_path)], plugin, env, stdin)
