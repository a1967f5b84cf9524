"""The stdlib shim against the real socket server in-process: answers, errors, a missing or slow daemon."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cni_shim import launcher, main
from cni_shim.thick import forward
from cni_shim.thick.dispatch import Answer, decode_request
from cni_shim.thick.server import Hooks, State, listen
from tests.support.cni_daemon import SHIM_ENV as ENV


class Running:
    def __init__(self, socket_dir: Path, state: State, requests: list[bytes]) -> None:
        self.socket_dir = socket_dir
        self.state = state
        self.requests = requests

    def conf(self, **extra) -> bytes:
        return json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "n",
                "type": "cni-shim",
                "daemonSocketDir": str(self.socket_dir),
                **extra,
            }
        ).encode()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Callable[..., Running]]:
    servers = []

    def start(answer: Callable[[bytes], Answer], *, hooks: Hooks | None = None) -> Running:
        requests: list[bytes] = []

        def serve(body: bytes) -> Answer:
            requests.append(body)
            return answer(body)

        state = State()
        state.ready.set()
        socket_dir = tmp_path / "run" / "sock"
        server = listen(str(socket_dir), serve, state, hooks)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return Running(socket_dir, state, requests)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_the_socket_dir_is_0700_and_the_socket_0600(daemon):
    running = daemon(lambda body: Answer(200, b"", "ok"))
    assert stat.S_IMODE(os.stat(running.socket_dir).st_mode) == 0o700
    sock = running.socket_dir / forward.SOCKET_NAME
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600


def test_add_forwards_env_and_config_bytes_and_prints_the_result(daemon):
    result = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0"}]}
    running = daemon(lambda body: Answer(200, json.dumps({"Result": result}).encode(), "ok"))
    stdin = running.conf(extra="kept as sent")
    status, out, err = main.run(ENV, lambda: stdin)
    assert (status, json.loads(out), err) == (0, result, "")
    (sent,) = running.requests
    env, config = decode_request(sent)
    assert config == stdin
    assert env == ENV


def test_the_daemons_error_comes_back_behind_the_multus_shims_context(daemon):
    error = {"cniVersion": "1.0.0", "code": 7, "msg": "cannot find x", "details": "NoNetworkFound"}
    running = daemon(lambda body: Answer(400, json.dumps(error).encode(), "NoNetworkFound"))
    stdin = running.conf()
    status, out, _ = main.run(ENV, lambda: stdin)
    assert status == 1
    # What kubelet events show Multus users; code and details stay the daemon's.
    wrapped = (
        "CmdAdd (shim): CNI request failed with status 400: 'cannot find x\n': StdinData: " + stdin.decode()
    )
    assert json.loads(out) == {**error, "msg": wrapped}
    # STATUS keeps a delegate's own error exactly as the daemon gave it.
    status, out, _ = main.run({**ENV, "CNI_COMMAND": "STATUS"}, lambda: stdin)
    assert (status, out) == (1, json.dumps(error, indent=4))


def test_the_result_is_printed_in_the_shim_configs_version(daemon):
    result = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0"}], "ips": [{"address": "10.1.0.5/24"}]}
    running = daemon(lambda body: Answer(200, json.dumps({"Result": result}).encode(), "ok"))
    stdin = json.dumps({**json.loads(running.conf()), "cniVersion": "0.2.0"}).encode()
    status, out, _ = main.run(ENV, lambda: stdin)
    assert status == 0
    assert json.loads(out) == {"cniVersion": "0.2.0", "ip4": {"ip": "10.1.0.5/24"}}


def test_an_empty_200_is_a_silent_success(daemon):
    running = daemon(lambda body: Answer(200, b"", "ok"))
    assert main.run({**ENV, "CNI_COMMAND": "DEL"}, running.conf) == (0, "", "")


def test_an_answer_in_no_known_shape_is_a_named_protocol_error(daemon):
    running = daemon(lambda body: Answer(500, b"oops", "x"))
    status, out, _ = main.run(ENV, running.conf)
    assert status == 1
    assert json.loads(out)["details"] == "DaemonProtocolError"
    assert json.loads(out)["msg"].startswith("cni-shim-daemon answered 500")


@pytest.mark.parametrize("command", ["ADD", "DEL"])
def test_no_daemon_is_try_again_later_never_a_silent_success(tmp_path, command):
    conf = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "n",
            "daemonSocketDir": str(tmp_path / "nothing"),
            "daemonReadyTimeout": 0.2,
        }
    ).encode()
    status, out, _ = main.run({**ENV, "CNI_COMMAND": command}, lambda: conf)
    doc = json.loads(out)
    assert status == 1
    assert doc["code"] == 11
    assert doc["details"] == "DaemonUnavailable"
    assert doc["msg"].startswith("cni-shim-daemon is not serving")
    assert "within 0.2s" in doc["msg"]


def test_a_daemon_that_is_shutting_down_is_not_sent_requests(daemon):
    running = daemon(lambda body: Answer(200, b"", "ok"))
    running.state.ready.clear()
    status, out, _ = main.run(ENV, lambda: running.conf(daemonReadyTimeout=0.3))
    assert status == 1
    assert "/readyz answered 500" in json.loads(out)["msg"]
    assert running.requests == []


def test_a_slow_daemon_is_a_timeout_error(daemon):
    release = threading.Event()

    def slow(body: bytes) -> Answer:
        release.wait(10)
        return Answer(200, b"", "ok")

    running = daemon(slow)
    try:
        status, out, _ = main.run(ENV, lambda: running.conf(daemonRequestTimeout=0.3))
    finally:
        release.set()
    doc = json.loads(out)
    assert (status, doc["code"]) == (1, 11)
    assert doc["details"] == "DaemonTimeout"
    assert doc["msg"].startswith("cni-shim-daemon did not answer within 0.3s")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/healthz", 200), ("POST", "/healthz", 200), ("GET", "/readyz", 200), ("GET", "/cni", 405),
     ("GET", "/nope", 404), ("GET", "/debug/informers", 404), ("POST", "/debug/informers/freeze", 404)],
)  # fmt: skip
def test_endpoints(daemon, method, path, status):
    running = daemon(lambda body: Answer(200, b"", "ok"))
    sock = str(running.socket_dir / forward.SOCKET_NAME)
    assert forward.exchange(sock, method, path, b"", 5)[0] == status


def test_test_hooks_answer_only_when_enabled(daemon):
    frozen = []
    hooks = Hooks(snapshot=lambda: {"pod": {"ns/p": "7"}}, freeze=lambda: frozen.append(True))
    running = daemon(lambda body: Answer(200, b"", "ok"), hooks=hooks)
    sock = str(running.socket_dir / forward.SOCKET_NAME)
    assert forward.exchange(sock, "GET", "/debug/informers", b"", 5) == (200, b'{"pod": {"ns/p": "7"}}')
    assert forward.exchange(sock, "POST", "/debug/informers/freeze", b"", 5)[0] == 200
    assert frozen == [True]


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        (b'{"DaemonSocketDir": "/run/x"}', "/run/x/cni-shim.sock"),
        (b'{"daemonSocketDir": ""}', None),
        (b'{"name": "thin"}', None),
        (b'{"daemonSocketDir": "/run/x", broken', None),
        (b'["daemonSocketDir"]', None),
    ],
)
def test_thick_mode_is_chosen_by_daemon_socket_dir(stdin, expected):
    target = forward.target(stdin)
    assert (target.path if target else None) == expected


def test_budgets_come_from_the_config_with_sane_defaults():
    target = forward.target(b'{"daemonSocketDir": "/d", "daemonReadyTimeout": 2, "daemonRequestTimeout": -1}')
    assert target is not None
    assert target.ready_timeout == 2
    assert target.request_timeout == forward.DEFAULT_REQUEST_TIMEOUT


def test_the_thick_shim_imports_only_the_standard_library(tmp_path):
    """A real process with the -S launcher: which non-stdlib modules a forwarded ADD loads."""
    shim = launcher.install(tmp_path / "cni-shim")
    conf = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "n",
            "daemonSocketDir": str(tmp_path / "none"),
            "daemonReadyTimeout": 0.05,
        }
    )
    # The shim ends with posix._exit (no atexit hooks), so the probe takes that exit over; it
    # imports nothing itself, so what it lists is the shim's own.
    probe = (
        "import posix, sys\n"
        "_end = posix._exit\n"
        "def _dump(status):\n"
        "    with open(sys.argv[1] + '.mods', 'w') as out:\n"
        "        out.write('\\n'.join(sorted(sys.modules)))\n"
        "    _end(status)\n"
        "posix._exit = _dump\n"
    )
    # Run the launcher's own lines after the probe, in one interpreter started the same way (-S).
    script = tmp_path / "probe.py"
    script.write_text(probe + "\n".join(shim.read_text().splitlines()[1:]))
    out = subprocess.run(
        [sys.executable, "-S", str(script), str(tmp_path / "run")],
        input=conf.encode(),
        env={
            "CNI_COMMAND": "ADD",
            "CNI_CONTAINERID": "c",
            "CNI_NETNS": "/x",
            "CNI_IFNAME": "eth0",
            "CNI_PATH": "/b",
        },
        capture_output=True,
        check=False,
    )
    assert out.returncode == 1
    assert json.loads(out.stdout)["details"] == "DaemonUnavailable"
    loaded = (tmp_path / "run.mods").read_text().split()
    ours = {m.split(".")[0] for m in loaded} - set(sys.stdlib_module_names) - {"__main__"}
    assert ours == {"cni_shim", "sriov_contract", "sriov_lib"}
    assert not [
        m
        for m in loaded
        if m.split(".")[0]
        in ("yaml", "jsonschema", "kubernetes", "pyroute2", "email", "http", "ssl", "os", "__future__")
    ]
    # Each extension module is a shared object to load on every invocation: only the two it needs.
    assert not {"binascii", "math", "base64"} & set(loaded)
    assert {"_socket", "_json"} <= set(loaded)


@given(st.binary(max_size=3000))
def test_the_shims_base64_is_the_standard_one(data):
    assert forward.base64(data) == base64.b64encode(data).decode()
