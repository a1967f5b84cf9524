"""CNI plugin that misbehaves on a chosen command and call number, for fault tests.

Config keys (besides the standard ones):
- ``stateFile`` (required): JSON file counting calls per command across processes.
- ``faults``: list of ``{"command": "ADD", "call": 2, "mode": ..., ...}``; ``call`` is 1-based
  per command and omitted means every call. Modes:
  - ``fail``: CNI error with ``code`` (default 11) and ``msg``;
  - ``hang``: sleep ``seconds`` (default 3600) before answering, so callers hit their timeout;
  - ``exit``: exit with status ``status`` (default 2) and print nothing;
  - ``signal``: kill itself with signal ``signal`` (default 9, SIGKILL);
  - ``garbage``: print text that is not JSON and exit 0.
Calls without a fault succeed like the recorder's default (prevResult or one interface).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plugins import skel
from plugins.result import passthrough


def count_call(state_file: Path, command: str) -> int:
    """Increment and return this command's call number, atomically across processes."""
    state_file.touch()
    with state_file.open("r+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        counts: dict[str, int] = json.loads(fh.read() or "{}")
        counts[command] = counts.get(command, 0) + 1
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps(counts))
        return counts[command]


def chosen_fault(faults: Any, command: str, call: int) -> Mapping[str, Any] | None:
    for fault in faults or ():
        if fault.get("command") == command and fault.get("call", call) == call:
            return dict(fault)
    return None


def inject(fault: Mapping[str, Any]) -> None:
    mode = fault.get("mode", "fail")
    if mode == "fail":
        raise skel.CniError(
            int(fault.get("code", skel.TRY_AGAIN_LATER)), str(fault.get("msg", "injected failure"))
        )
    if mode == "hang":
        time.sleep(float(fault.get("seconds", 3600)))
    elif mode == "exit":
        os._exit(int(fault.get("status", 2)))
    elif mode == "signal":
        os.kill(os.getpid(), int(fault.get("signal", signal.SIGKILL)))
    elif mode == "garbage":
        sys.stdout.write("this is not JSON\n")
        sys.stdout.flush()
        os._exit(0)
    else:
        raise skel.CniError(skel.INVALID_NETWORK_CONFIG, f"faulty: unknown mode {mode!r}")


def handle(args: skel.CmdArgs) -> Mapping[str, Any] | None:
    state = args.conf.get("stateFile")
    if not state:
        raise skel.CniError(skel.INVALID_NETWORK_CONFIG, "faulty needs 'stateFile' in its config")
    call = count_call(Path(str(state)), args.command)
    fault = chosen_fault(args.conf.get("faults"), args.command, call)
    if fault is not None:
        inject(fault)
    return passthrough(args.conf, args.ifname, args.netns) if args.command == "ADD" else None


def main() -> None:
    skel.main(dict.fromkeys(("ADD", "DEL", "CHECK", "GC", "STATUS"), handle))


if __name__ == "__main__":
    main()
