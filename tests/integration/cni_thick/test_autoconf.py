"""multusConfigFile auto with the real daemon (issue #18 point 6): the daemon writes 00-multus.conf
from the primary it finds, the shim runs an ADD from that very file against the real API server,
a changed primary is picked up, and a cniVersion mismatch stops the daemon with no file written."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from testbed.cni_daemon import DAEMON, DaemonProc
from testbed.cni_objects import create_pod
from testbed.waiting import wait_for
from tests.support.cni import run_cni
from tests.support.cni_daemon import pod_args, shim_bin_dir

pytestmark = [pytest.mark.integration, pytest.mark.netns]


def _dirs(tmp_path: Path, primary: Mapping[str, Any]) -> tuple[Path, Path]:
    auto, net_d = tmp_path / "auto", tmp_path / "net.d"
    auto.mkdir()
    net_d.mkdir()
    (auto / "10-podnet.conf").write_text(json.dumps(primary))
    return auto, net_d


def _text(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def test_the_generated_file_is_written_used_and_kept_current(
    testbed, k8s_namespace, cni_daemon, cni_bin_dir, netns, tmp_path
):
    log = tmp_path / "calls.jsonl"
    primary = {"cniVersion": "1.0.0", "name": "podnet", "type": "recorder", "logFile": str(log)}
    auto, net_d = _dirs(tmp_path, primary)
    bin_dir = shim_bin_dir(tmp_path / "bin", cni_bin_dir, "multus-shim")
    daemon = cni_daemon(
        {
            "cniVersion": "1.0.0",
            "multusConfigFile": "auto",
            "multusAutoconfigDir": str(auto),
            "cniConfigDir": str(net_d),
            "binDir": str(bin_dir),
            "cniDir": str(tmp_path / "cache"),
        }
    )
    generated = net_d / "00-multus.conf"
    conf = json.loads(wait_for(lambda: _text(generated), 10, what="00-multus.conf"))
    # binDir and cniDir are MultusConf keys, so they go into the file, in Multus's order.
    assert list(conf.items()) == [
        ("binDir", str(bin_dir)),
        ("cniVersion", "1.0.0"),
        ("name", "multus-cni-network"),
        ("clusterNetwork", str(auto / "10-podnet.conf")),
        ("type", "multus-shim"),
        ("cniDir", str(tmp_path / "cache")),
    ]
    assert generated.stat().st_mode & 0o777 == 0o600

    # The runtime's ADD from exactly that file, through our shim installed as multus-shim; the
    # generated file names no socket, so point it at this daemon's (a node uses /run/multus/).
    pod = create_pod(testbed.api_client, k8s_namespace, "workload", testbed.node_name, {})
    add = run_cni(
        "multus-shim",
        "ADD",
        {**conf, "daemonSocketDir": str(daemon.socket_dir)},
        bin_dir=bin_dir,
        container_id="auto1",
        netns=netns(),
        ifname="eth0",
        cni_args=pod_args(k8s_namespace, "workload", pod["metadata"]["uid"]),
    )
    assert add.returncode == 0, add.stdout + add.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["command"], c["stdin"]["name"]) for c in calls] == [("ADD", "podnet")]

    # A changed primary is picked up: its capabilities join the generated config.
    (auto / "10-podnet.conf").write_text(json.dumps({**primary, "capabilities": {"portMappings": True}}))
    wait_for(
        lambda: json.loads(generated.read_text()).get("capabilities") == {"portMappings": True},
        10,
        what="the regenerated 00-multus.conf",
    )
    assert daemon.stop() == 0
    assert not generated.exists()  # removed when the daemon stops


def test_a_cni_version_mismatch_stops_the_daemon_and_writes_nothing(tmp_path):
    auto, net_d = _dirs(tmp_path, {"cniVersion": "0.3.1", "name": "podnet", "type": "recorder"})
    daemon = DaemonProc(
        tmp_path,
        {
            "cniVersion": "0.4.0",
            "multusConfigFile": "auto",
            "multusAutoconfigDir": str(auto),
            "cniConfigDir": str(net_d),
        },
        {"PATH": "/usr/bin:/bin"},
    )
    out = subprocess.run(
        [str(DAEMON), "--config", str(daemon.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert (
        "failed to create the configuration manager for the primary CNI plugin: AutoconfFailed: failed to load the "
        "primary CNI configuration as a multus delegate with error 'delegate cni version is 0.3.1 while top level "
        "cni version is 0.4.0'"
    ) in out.stderr
    assert list(net_d.iterdir()) == []
