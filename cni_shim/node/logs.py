"""Multus-style logging: `<RFC3339> [<level>] <message>` to stderr and/or logFile, default level panic."""

from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import TextIO

_LEVELS = {"panic": 0, "error": 1, "warning": 2, "verbose": 3, "debug": 4}


class Logger:
    def __init__(self, level: str = "", to_stderr: bool = True, log_file: str = "") -> None:
        self._level = _LEVELS.get(level.lower(), 0)
        self._to_stderr = to_stderr
        self._file: TextIO | None = None
        if log_file:
            try:
                # 0600 as Multus's logger (lumberjack) creates it: readers are root's tools only.
                fd = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                self._file = open(fd, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
            except OSError as exc:
                print(f"cni-shim: cannot open logFile {log_file}: {exc.strerror}", file=sys.stderr)

    def _emit(self, level: str, message: str) -> None:
        if _LEVELS[level] > self._level:
            return
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} [{level}] {message}\n"
        if self._to_stderr:
            sys.stderr.write(line)
        if self._file is not None:
            self._file.write(line)
            self._file.flush()

    def error(self, message: str) -> None:
        self._emit("error", message)

    def warning(self, message: str) -> None:
        self._emit("warning", message)

    def verbose(self, message: str) -> None:
        self._emit("verbose", message)

    def debug(self, message: str) -> None:
        self._emit("debug", message)
