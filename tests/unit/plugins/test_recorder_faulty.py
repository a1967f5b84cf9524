import json
import signal
import subprocess
from typing import TypedDict

import pytest

from tests.support.cni import run_cni

BASE = {"cniVersion": "1.0.0", "name": "n"}


class Call(TypedDict):
    """The runtime arguments every call in this module shares."""

    container_id: str
    netns: str
    ifname: str


CALL: Call = {"container_id": "c1", "netns": "/run/netns/none", "ifname": "net1"}


def test_recorder_logs_each_call_and_returns_default_result(cni_bin_dir, tmp_path):
    log = tmp_path / "calls.jsonl"
    conf = BASE | {"type": "recorder", "logFile": str(log)}
    add = run_cni("recorder", "ADD", conf, bin_dir=cni_bin_dir, cni_args="K=V", **CALL)
    assert add.returncode == 0, add.stdout
    assert add.json == {
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "net1", "sandbox": "/run/netns/none"}],
        "ips": [],
    }
    delete = run_cni("recorder", "DEL", conf, bin_dir=cni_bin_dir, **CALL)
    assert (delete.returncode, delete.stdout) == (0, "")
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["command"] for e in entries] == ["ADD", "DEL"]
    assert entries[0]["env"]["CNI_ARGS"] == "K=V"
    assert entries[0]["stdin"] == conf
    assert entries[0]["time"] <= entries[1]["time"]


def test_recorder_returns_configured_result_and_error(cni_bin_dir, tmp_path):
    result = {"cniVersion": "0.4.0", "ips": [{"address": "10.0.0.2/24", "version": "4"}]}
    conf = BASE | {
        "cniVersion": "0.4.0",
        "type": "recorder",
        "logFile": str(tmp_path / "l"),
        "result": result,
        "errors": {"DEL": {"code": 11, "msg": "try later"}},
    }
    assert run_cni("recorder", "ADD", conf, bin_dir=cni_bin_dir, **CALL).json == result
    failed = run_cni("recorder", "DEL", conf, bin_dir=cni_bin_dir, **CALL)
    assert failed.returncode == 1
    assert failed.json == {"cniVersion": "0.4.0", "code": 11, "msg": "try later"}


def test_recorder_passes_prev_result_through(cni_bin_dir, tmp_path):
    prev = {
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0"}],
        "ips": [{"address": "10.0.0.9/24", "interface": 0}],
    }
    conf = BASE | {"type": "recorder", "logFile": str(tmp_path / "l"), "prevResult": prev}
    assert run_cni("recorder", "ADD", conf, bin_dir=cni_bin_dir, **CALL).json == prev


def faulty_conf(tmp_path, *faults):
    return BASE | {"type": "faulty", "stateFile": str(tmp_path / "state.json"), "faults": list(faults)}


def test_faulty_fails_only_on_the_chosen_call(cni_bin_dir, tmp_path):
    conf = faulty_conf(tmp_path, {"command": "ADD", "call": 2, "mode": "fail", "code": 11, "msg": "second"})
    runs = [run_cni("faulty", "ADD", conf, bin_dir=cni_bin_dir, **CALL) for _ in range(3)]
    assert [r.returncode for r in runs] == [0, 1, 0]
    assert runs[1].json == {"cniVersion": "1.0.0", "code": 11, "msg": "second"}
    assert json.loads((tmp_path / "state.json").read_text()) == {"ADD": 3}


def test_faulty_exit_signal_and_garbage(cni_bin_dir, tmp_path):
    conf = faulty_conf(
        tmp_path,
        {"command": "DEL", "call": 1, "mode": "exit", "status": 7},
        {"command": "DEL", "call": 2, "mode": "signal"},
        {"command": "DEL", "call": 3, "mode": "garbage"},
    )
    exited = run_cni("faulty", "DEL", conf, bin_dir=cni_bin_dir, **CALL)
    killed = run_cni("faulty", "DEL", conf, bin_dir=cni_bin_dir, **CALL)
    garbage = run_cni("faulty", "DEL", conf, bin_dir=cni_bin_dir, **CALL)
    assert (exited.returncode, exited.stdout) == (7, "")
    assert killed.returncode == -signal.SIGKILL
    assert garbage.returncode == 0 and garbage.stdout.strip() == "this is not JSON"


def test_faulty_hang_is_cut_by_the_callers_timeout(cni_bin_dir, tmp_path):
    conf = faulty_conf(tmp_path, {"command": "ADD", "mode": "hang", "seconds": 30})
    with pytest.raises(subprocess.TimeoutExpired):
        run_cni("faulty", "ADD", conf, bin_dir=cni_bin_dir, timeout=1.5, **CALL)
    assert json.loads((tmp_path / "state.json").read_text()) == {"ADD": 1}


def test_python_plugins_answer_version(cni_bin_dir):
    for plugin in ("sriov", "recorder", "faulty"):
        out = run_cni(plugin, "VERSION", b"", bin_dir=cni_bin_dir)
        assert out.returncode == 0
        assert out.json["supportedVersions"][-1] == "1.1.0"
