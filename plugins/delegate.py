"""Run an IPAM-style delegate: found in CNI_PATH, same environment and stdin, only CNI_COMMAND changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plugins.skel import INTERNAL, CniError


def find_plugin(plugin_type: str, cni_path: str) -> Path:
    for directory in filter(None, cni_path.split(os.pathsep)):
        candidate = Path(directory) / plugin_type
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise CniError(
        INTERNAL, f'failed to find plugin "{plugin_type}" in path [{cni_path.replace(os.pathsep, " ")}]'
    )


def exec_delegate(
    plugin_type: str, command: str, stdin: bytes, environ: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """Run ``plugin_type`` with ``command``; return its parsed stdout (None when empty).

    A delegate error is re-raised with its own code and message, as Go's invoke package does.
    """
    env = dict(os.environ if environ is None else environ)
    env["CNI_COMMAND"] = command
    binary = find_plugin(plugin_type, env.get("CNI_PATH", ""))
    proc = subprocess.run([str(binary)], input=stdin, env=env, capture_output=True, check=False)
    sys.stderr.buffer.write(proc.stderr)
    text = proc.stdout.decode(errors="replace").strip()
    if proc.returncode != 0:
        try:
            err = json.loads(text)
            raise CniError(
                int(err.get("code", INTERNAL)), str(err.get("msg", "")), str(err.get("details", ""))
            )
        except (ValueError, AttributeError):
            raise CniError(
                INTERNAL, f"netplugin failed with no error message: exit status {proc.returncode}: {text}"
            ) from None
    if not text:
        return None
    try:
        parsed: dict[str, Any] = json.loads(text)
    except ValueError as exc:
        raise CniError(INTERNAL, f"{plugin_type} printed an unparsable result: {exc}") from None
    return parsed
