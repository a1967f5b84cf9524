"""CNI plugin that records every call and answers as configured, for protocol tests.

Config keys (besides the standard ones):
- ``logFile`` (required): one JSON line per call is appended: command, env (CNI_* only), stdin
  (decoded JSON, or the raw text if it is not JSON), time (Unix seconds, float).
- ``result``: the ADD result to print (its ``cniVersion`` is set to the request's); default: the
  prevResult unchanged, else one interface named CNI_IFNAME.
- ``errors``: ``{"<COMMAND>": {"code": int, "msg": str, "details": str}}`` to fail that command.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from plugins import skel
from plugins.result import passthrough


def record(log_file: str, args: skel.CmdArgs) -> None:
    """Append one call to ``log_file`` under an exclusive lock (calls may run in parallel)."""
    try:
        stdin: Any = json.loads(args.stdin)
    except ValueError:
        stdin = args.stdin.decode(errors="replace")
    entry = {
        "command": args.command,
        "env": {k: v for k, v in os.environ.items() if k.startswith("CNI_")},
        "stdin": stdin,
        "time": time.time(),
    }
    with open(log_file, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def handle(args: skel.CmdArgs) -> Mapping[str, Any] | None:
    log_file = args.conf.get("logFile")
    if not log_file:
        raise skel.CniError(skel.INVALID_NETWORK_CONFIG, "recorder needs 'logFile' in its config")
    record(str(log_file), args)
    error = (args.conf.get("errors") or {}).get(args.command)
    if error:
        raise skel.CniError(
            int(error.get("code", 100)), str(error.get("msg", "")), str(error.get("details", ""))
        )
    if args.command != "ADD":
        return None
    configured = args.conf.get("result")
    if isinstance(configured, Mapping):
        return {**configured, "cniVersion": args.cni_version}
    return passthrough(args.conf, args.ifname, args.netns)


def main() -> None:
    verbs = ("ADD", "DEL", "CHECK", "GC", "STATUS")
    skel.main(dict.fromkeys(verbs, handle))


if __name__ == "__main__":
    main()
