"""The process adapter: find a plugin binary on the search path and run it (CNI exec protocol)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from cni_shim import reasons
from cni_shim.errors import CniError

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
            doc = json.loads(text)
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


def run_plugin(argv: Sequence[str], plugin: str, env: Mapping[str, str], stdin: bytes) -> bytes:
    """Execute a found plugin (argv[0] may be a wrapper such as chroot); its stderr passes through."""
    for attempt in range(_BUSY_RETRIES + 1):
        try:
            proc = subprocess.run(list(argv), input=stdin, env=dict(env), capture_output=True, check=False)
            break
        except OSError as exc:
            if exc.errno != errno.ETXTBSY or attempt == _BUSY_RETRIES:
                raise CniError(
                    reasons.DELEGATE_FAILED, f"cannot execute {' '.join(argv)}: {exc.strerror}"
                ) from exc
            time.sleep(1)
    if proc.stderr:
        sys.stderr.buffer.write(proc.stderr)
        sys.stderr.flush()
    if proc.returncode != 0:
        raise plugin_failure(plugin, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout


class ProcessExecutor:
    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        return run_plugin([find_plugin(plugin, search_path)], plugin, env, stdin)
