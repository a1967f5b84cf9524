"""The process adapter on real processes: posix_spawn with stdin fed and both outputs read at once."""

from __future__ import annotations

import errno
import os
import time

import pytest

from cni_shim.errors import CniError
from cni_shim.node import execution
from cni_shim.node.execution import run_plugin, spawn

SH = "/bin/sh"


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_stdin_goes_in_and_both_outputs_and_the_status_come_back():
    assert spawn(["/bin/cat"], {}, b'{"cniVersion":"1.0.0"}') == (0, b'{"cniVersion":"1.0.0"}', b"")
    assert spawn([SH, "-c", "echo out; echo err >&2; exit 3"], {}, b"") == (3, b"out\n", b"err\n")


def test_the_child_gets_exactly_the_environment_given():
    status, out, _ = spawn([SH, "-c", 'echo "$CNI_COMMAND:${HOME:-unset}"'], {"CNI_COMMAND": "ADD"}, b"")
    assert (status, out) == (0, b"ADD:unset\n")


def test_a_large_stdin_does_not_deadlock_against_a_child_that_writes_first():
    big = b"x" * (4 * 1024 * 1024)  # far beyond any pipe buffer, in both directions
    status, out, err = spawn([SH, "-c", "head -c 300000 /dev/zero >&2; cat"], {"PATH": os.defpath}, big)
    assert (status, len(out), len(err)) == (0, len(big), 300000)


def test_a_child_that_never_reads_its_stdin_still_answers():
    assert spawn([SH, "-c", "echo done"], {}, b"y" * (1024 * 1024)) == (0, b"done\n", b"")


def test_a_signal_is_a_negative_status_and_nothing_leaks():
    before = open_fds()
    assert spawn([SH, "-c", "kill -9 $$"], {}, b"")[0] == -9
    with pytest.raises(OSError) as exc:
        spawn(["/nonexistent/plugin"], {}, b"{}")
    assert exc.value.errno == errno.ENOENT
    assert open_fds() == before


def test_run_plugin_maps_failures_and_passes_stderr_through(capfd):
    with pytest.raises(CniError) as failed:
        run_plugin([SH, "-c", 'echo \'{"code":7,"msg":"no"}\'; echo warn >&2; exit 1'], "plug", {}, b"")
    assert (failed.value.code, failed.value.message) == (7, "no")
    assert capfd.readouterr().err == "warn\n"
    with pytest.raises(CniError) as missing:
        run_plugin(["/nonexistent/plugin"], "plug", {}, b"")
    assert "cannot execute /nonexistent/plugin" in missing.value.message


def test_a_busy_binary_is_retried(monkeypatch):
    calls = []

    def busy_once(argv, env, stdin):
        calls.append(argv)
        if len(calls) == 1:
            raise OSError(errno.ETXTBSY, "Text file busy")
        return 0, b"ok", b""

    monkeypatch.setattr(execution, "spawn", busy_once)
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    assert run_plugin(["/x"], "x", {}, b"") == b"ok"
    assert len(calls) == 2


def test_the_plugin_gets_default_signal_handling_not_pythons_ignored_sigpipe():
    # SigIgn in /proc/<pid>/status: bit 13 is SIGPIPE; Python itself ignores it.
    status, out, _ = spawn([SH, "-c", "grep SigIgn /proc/$$/status"], {}, b"")
    assert status == 0
    assert not int(out.split()[1], 16) & (1 << (13 - 1))
