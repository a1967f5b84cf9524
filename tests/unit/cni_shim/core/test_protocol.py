"""The executable's protocol surface: env checks, verbs, version gates, error JSON, hostile input."""

from __future__ import annotations

import json
import os

import pytest

from cni_shim import handler, main


def test_missing_command_prints_about_line_and_succeeds(shim):
    status, out, err = main.run({}, lambda: b"", shim.services)
    assert status == 0 and out == ""
    assert "meta-plugin" in err and "1.1.0" in err


def test_version_ignores_stdin_and_env(shim):
    status, out, _ = main.run({"CNI_COMMAND": "VERSION"}, lambda: b"garbage", shim.services)
    assert status == 0
    assert json.loads(out) == {
        "cniVersion": "1.1.0",
        "supportedVersions": ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"],
    }


def test_missing_env_names_every_missing_variable(shim):
    status, out, _ = main.run({"CNI_COMMAND": "ADD"}, lambda: b"{}", shim.services)
    assert status == 1
    doc = json.loads(out)
    assert doc["code"] == 4
    assert "[CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME,CNI_PATH]" in doc["msg"]


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"CNI_CONTAINERID": "bad id!"}, "invalid characters in containerID"),
        ({"CNI_IFNAME": "a" * 16}, "interface name is too long"),
        ({"CNI_IFNAME": "a/b"}, "contains / or :"),
    ],
)
def test_invalid_env_values_are_code_4(shim, env, fragment):
    out = shim.run("ADD", shim.conf(), env=env)
    assert out.status == 1
    assert out.json["code"] == 4
    assert fragment in out.json["msg"]


@pytest.mark.parametrize(
    ("stdin", "code"),
    [
        (b"{not json", 6),
        (b"[1,2]", 6),
        (b"\xff\xfe", 6),
        (json.dumps({"cniVersion": "1.0.0", "type": "multus", "delegates": [{"type": "x"}]}).encode(), 7),
        (json.dumps({"cniVersion": "9.9.9", "name": "n", "delegates": [{"type": "x"}]}).encode(), 1),
        (json.dumps({"cniVersion": 1, "name": "n", "delegates": [{"type": "x"}]}).encode(), 6),
        (json.dumps({"cniVersion": "9.9.9", "name": "n"}).encode(), 1),
        (json.dumps({"cniVersion": "1.0.0", "name": "bad name", "delegates": [{"type": "x"}]}).encode(), 7),
        (json.dumps({"cniVersion": "1.0.0", "name": "n"}).encode(), 7),
        (json.dumps({"cniVersion": "1.0.0", "name": "n", "delegates": "x"}).encode(), 6),
        (json.dumps({"cniVersion": "1.0.0", "name": "n", "delegates": [{"name": "no-type"}]}).encode(), 7),
        (json.dumps({"cniVersion": "1.0.0", "name": "n", "delegates": [{"plugins": []}]}).encode(), 7),
        (json.dumps({"cniVersion": "1.0.0", "name": "n", "delegates": [None]}).encode(), 7),
        (
            json.dumps(
                {"cniVersion": "1.0.0", "name": "n", "logToStderr": "yes", "delegates": [{"type": "x"}]}
            ).encode(),
            6,
        ),
    ],
)
def test_bad_config_gets_the_spec_error_code(shim, stdin, code):
    out = shim.run("ADD", stdin)
    assert out.status == 1, out.stdout
    assert out.json["code"] == code, out.json
    assert shim.executor.calls == []


def test_unknown_command_is_code_4_after_config_decoding(shim):
    out = shim.run("FROB", shim.conf())
    assert out.json["code"] == 4
    assert "unknown CNI_COMMAND" in out.json["msg"]


@pytest.mark.parametrize(("command", "version"), [("CHECK", "0.3.1"), ("GC", "1.0.0"), ("STATUS", "1.0.0")])
def test_version_gates(shim, command, version):
    out = shim.run(command, shim.conf(cniVersion=version))
    assert out.json["code"] == 1
    assert f"does not allow {command}" in out.json["msg"]


def test_bad_cni_args_are_code_4(shim):
    out = shim.run("ADD", shim.conf(), args="K8S_POD_NAME=a=b")
    assert out.json["code"] == 4
    out = shim.run("ADD", shim.conf(), args="FOO=bar")
    assert out.json["code"] == 4 and "unknown args" in out.json["msg"]


def test_huge_values_fail_cleanly_and_do_not_touch_the_cache(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    assert shim.run("ADD", shim.conf()).status == 0
    before = (shim.cni_dir / "c1").read_bytes()
    huge = shim.conf(delegates=[{"cniVersion": "1.0.0", "name": "x" * 200_000, "type": "ptp"}])
    out = shim.run("ADD", huge, container_id="c1")
    assert out.status == 1
    assert out.json["code"] == 7, out.json
    assert shim.executor.commands() == [("ptp", "ADD", "eth0")]  # only the first, good ADD ran
    out = shim.run("DEL", shim.conf(), container_id="c" * 100_000)
    assert out.json["code"] == 4
    out = shim.run("ADD", shim.conf(), args="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=" + "p" * 100_000)
    assert out.status == 0  # an unknown Pod is Multus's empty success, not a crash
    deep = b'{"cniVersion":"1.0.0","name":"n","delegates":[' + b"[" * 100_000 + b"]" * 100_000 + b"]}"
    out = shim.run("DEL", deep)
    assert out.status == 1 and out.json["code"] in (6, 7)
    assert (shim.cni_dir / "c1").read_bytes() == before


def test_unexpected_failure_is_error_json_not_a_traceback(shim, monkeypatch):
    def boom(*_args, **_kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(handler, "handle", boom)
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert out.json["code"] == 999
    assert "kaboom" in out.json["msg"] and "Traceback" not in out.stdout + out.stderr


def test_result_is_converted_to_the_callers_version(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    out = shim.run("ADD", shim.conf(cniVersion="0.2.0"))
    assert out.json == {"cniVersion": "0.2.0", "ip4": {"ip": "10.0.0.2/24", "gateway": "10.0.0.1"}}
    out = shim.run("ADD", shim.conf(cniVersion="0.4.0"), container_id="c2")
    assert out.json["ips"][0]["version"] == "4"
    assert out.json["interfaces"] == [
        {"name": "eth0", "mac": "02:00:00:00:00:01", "sandbox": "/run/netns/t1"}
    ]


@pytest.mark.parametrize("var", ["CNI_IFNAME", "CNI_ARGS", "CNI_CONTAINERID"])
def test_non_utf8_environment_bytes_are_code_4(shim, var):
    raw = b"K8S_POD_NAME=\xff" if var == "CNI_ARGS" else b"e\xff"
    out = shim.run("ADD", shim.conf(), env={var: os.fsdecode(raw)})
    assert out.status == 1
    assert out.json["code"] == 4, out.json
