"""The real shim and daemon processes: crashes, restarts, DEL errors, DEL after the Pod is gone.

Delegates are the recorder and the fault injector, so these need no network namespaces; the
tests marked integration also use the real kube-apiserver and its audit log.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.apiobjects import name_of
from testbed.cni_daemon import DAEMON_USER, shim_conf
from testbed.cni_objects import create_pod
from testbed.waiting import wait_for
from tests.support.cni_daemon import SANDBOX, pod_args, run_shim

CID = "c0ffee"


def _recorder(log: Path, **extra: Any) -> dict[str, Any]:
    return {"cniVersion": "1.0.0", "name": "podnet", "type": "recorder", "logFile": str(log), **extra}


def _calls(log: Path) -> list[tuple[str, str]]:
    if not log.exists():
        return []
    return [
        (c["command"], c["env"]["CNI_CONTAINERID"]) for c in map(json.loads, log.read_text().splitlines())
    ]


def _counts(state: Path) -> dict[str, int]:
    try:
        data: dict[str, int] = json.loads(state.read_text() or "{}")
    except FileNotFoundError:
        return {}
    return data


def test_killed_mid_add_leaves_a_cache_the_restarted_daemon_deletes_from(cni_daemon, thick_bin, tmp_path):
    cache = tmp_path / "cache"
    daemon = cni_daemon({"cniDir": str(cache), "binDir": str(thick_bin)}, kube=False)
    state = tmp_path / "faulty.json"
    conf = shim_conf(
        daemon,
        delegates=[
            {
                "cniVersion": "1.0.0",
                "name": "hanging",
                "type": "faulty",
                "stateFile": str(state),
                "faults": [{"command": "ADD", "mode": "hang", "seconds": 120}],
            }
        ],
    )
    shim = _start_shim(thick_bin, "ADD", conf, CID)
    wait_for(lambda: _counts(state).get("ADD") == 1, 30, what="the delegate ADD to be running")
    daemon.kill()
    assert shim.wait(timeout=30) == 1
    assert shim.stdout is not None
    out = shim.stdout.read()
    shim.stdout.close()
    error = json.loads(out)
    assert error["code"] == 11
    assert error["details"] == "DaemonUnavailable"
    assert (cache / CID).exists()  # the plan was saved before any delegate ran

    daemon.start()
    rm = run_shim(thick_bin, "DEL", conf, CID, pod_args("ns", "p"))
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert _counts(state) == {"ADD": 1, "DEL": 1}
    assert not (cache / CID).exists()


def test_a_restarted_daemon_serves_del_for_earlier_attachments(cni_daemon, thick_bin, tmp_path):
    log = tmp_path / "calls.jsonl"
    daemon = cni_daemon({"cniDir": str(tmp_path / "cache"), "binDir": str(thick_bin)}, kube=False)
    conf = shim_conf(daemon, delegates=[_recorder(log)])
    add = run_shim(thick_bin, "ADD", conf, CID, pod_args("ns", "p"))
    assert add.returncode == 0, add.stdout
    assert daemon.stop() == 0  # SIGTERM: drains and exits cleanly
    refused = run_shim(thick_bin, "DEL", {**conf, "daemonReadyTimeout": 0.3}, CID, pod_args("ns", "p"))
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["code"] == 11  # never a silent success while the daemon is away
    daemon.start()
    rm = run_shim(thick_bin, "DEL", conf, CID, pod_args("ns", "p"))
    assert rm.returncode == 0, rm.stdout
    assert _calls(log) == [("ADD", CID), ("DEL", CID)]


def test_a_del_error_reads_exactly_as_in_thin_mode(cni_daemon, thick_bin, tmp_path):
    daemon = cni_daemon({"binDir": str(thick_bin)}, kube=False)
    failing = _recorder(
        tmp_path / "calls.jsonl", errors={"DEL": {"code": 7, "msg": "cannot release", "details": "x"}}
    )
    outputs = []
    for mode, extra in (("thin", {}), ("thick", {"daemonSocketDir": str(daemon.socket_dir)})):
        conf = {
            "cniVersion": "1.0.0",
            "name": "multus-cni-network",
            "type": "cni-shim",
            "cniDir": str(tmp_path / "cache"),
            "delegates": [failing],
            **extra,
        }
        cid = f"{CID}-{mode}"
        assert run_shim(thick_bin, "ADD", conf, cid, pod_args("ns", "p")).returncode == 0
        rm = run_shim(thick_bin, "DEL", conf, cid, pod_args("ns", "p"))
        outputs.append((rm.returncode, rm.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == 1
    # Multus's delPlugins text around the delegate's own error; the reason sits in details.
    assert json.loads(outputs[0][1])["msg"] == (
        'DelegateDel: error invoking DelegateDel - "recorder": error in getting result from DelNetwork: '
        "cannot release; x"
    )
    assert json.loads(outputs[0][1])["details"] == "DelegateFailed"


@pytest.mark.integration
def test_add_recovers_a_missing_uid_live_and_del_after_pod_deletion_reads_nothing(
    testbed, k8s_namespace, cni_daemon, thick_bin, tmp_path
):
    ns = k8s_namespace
    log = tmp_path / "calls.jsonl"
    daemon = cni_daemon(
        {"cniDir": str(tmp_path / "cache"), "binDir": str(thick_bin), "liveNetworkConfigOnAdd": True}
    )
    conf = shim_conf(daemon, delegates=[_recorder(log)])
    pod = create_pod(testbed.api_client, ns, "gone-soon", testbed.node_name, {})
    add = run_shim(thick_bin, "ADD", conf, CID, pod_args(ns, "gone-soon"))  # the runtime sent no UID
    assert add.returncode == 0, add.stdout
    (logged,) = [e for e in daemon.logs() if e.get("msg") == "ADD ok"]
    assert logged["uid"] == pod["metadata"]["uid"]

    core = client.CoreV1Api(testbed.api_client)
    core.delete_namespaced_pod("gone-soon", ns, grace_period_seconds=0)
    wait_for(
        lambda: not any(name_of(p) == "gone-soon" for p in core.list_namespaced_pod(ns).items),
        30,
        what="the Pod to be gone",
    )
    mark = testbed.audit.mark()
    rm = run_shim(thick_bin, "DEL", conf, CID, pod_args(ns, "gone-soon"))
    assert rm.returncode == 0, rm.stdout
    assert _calls(log) == [("ADD", CID), ("DEL", CID)]
    assert testbed.audit.events(since=mark, user=DAEMON_USER, verb="get") == []


def _start_shim(bin_dir: Path, command: str, conf: dict[str, Any], cid: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": cid,
        "CNI_NETNS": SANDBOX,
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": pod_args("ns", cid),
        "CNI_PATH": str(bin_dir),
    }
    proc = subprocess.Popen(
        [str(bin_dir / "cni-shim")], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(conf))
    proc.stdin.close()
    return proc


def test_other_containers_proceed_while_one_container_waits_its_turn(cni_daemon, thick_bin, tmp_path):
    daemon = cni_daemon({"cniDir": str(tmp_path / "cache"), "binDir": str(thick_bin)}, kube=False)
    state = tmp_path / "faulty.json"
    conf = shim_conf(
        daemon,
        delegates=[
            {
                "cniVersion": "1.0.0",
                "name": "slow",
                "type": "faulty",
                "stateFile": str(state),
                "faults": [{"command": "ADD", "call": 1, "mode": "hang", "seconds": 8}],
            }
        ],
    )
    slow_add = _start_shim(thick_bin, "ADD", conf, "a")
    wait_for(lambda: _counts(state).get("ADD") == 1, 30, what="container a's ADD to be running")
    queued_del = _start_shim(thick_bin, "DEL", conf, "a")
    other = run_shim(thick_bin, "ADD", conf, "b", pod_args("ns", "b"))
    assert other.returncode == 0, other.stdout
    assert slow_add.poll() is None  # b was served while a's ADD still ran
    assert queued_del.poll() is None
    assert _counts(state) == {"ADD": 2}  # a's DEL has not reached its delegate
    assert slow_add.wait(timeout=60) == 0
    assert queued_del.wait(timeout=60) == 0
    assert _counts(state) == {"ADD": 2, "DEL": 1}
    for proc in (slow_add, queued_del):
        assert proc.stdout is not None
        proc.stdout.close()
