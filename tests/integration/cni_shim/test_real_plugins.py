"""cni-shim as a real executable under cnitool, with real Go plugins in real network namespaces.

No API server here: the shim runs in Multus's delegates mode. The live-API path is covered by
test_live_api.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.cni import CniRun, cluster_network, run_cni, run_cnitool, shim_net_dir
from tests.support.cni_daemon import shim_bin_dir

pytestmark = pytest.mark.netns


@pytest.fixture
def shim_bin(tmp_path: Path, cni_bin_dir: Path) -> Path:
    """The plugin dir plus the shim, as `cni-shim` and under Multus's file name (drop-in)."""
    return shim_bin_dir(tmp_path / "bin", cni_bin_dir, "multus", "cni-shim", recorder_as_sriov=False)


def _ip(netns: str, *args: str) -> str:
    return subprocess.run(
        ["ip", "-n", Path(netns).name, *args], capture_output=True, text=True, check=False
    ).stdout


def _multus_conf(
    tmp_path: Path, shim_bin: Path, delegates: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """A Multus-style conf (the shim as `multus`) with its delegates inline, as stdin of a direct call."""
    return {
        "cniVersion": "1.0.0",
        "name": "shimnet",
        "type": "multus",
        "cniDir": str(tmp_path / "cache"),
        "binDir": str(shim_bin),
        **extra,
        "delegates": delegates,
    }


def test_cnitool_add_check_status_gc_del_with_real_plugins(tmp_path, shim_bin, netns, veth, cnitool):
    ns = netns()
    side = {
        "cniVersion": "1.0.0",
        "name": "sidenet",
        "type": "host-device",
        "device": veth,
        "ipam": {"type": "static", "addresses": [{"address": "192.0.2.10/24"}]},
    }
    net_dir = shim_net_dir(tmp_path, [cluster_network(tmp_path), side])
    mac = "02:aa:bb:cc:dd:ee"
    env = {"CAP_ARGS": json.dumps({"mac": mac})}
    add = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin, env=env)
    assert add.returncode == 0, add.stderr
    result = add.json
    assert result["cniVersion"] == "1.1.0"
    assert [i["name"] for i in result["interfaces"] if i.get("sandbox")] == ["eth0"]
    assert f"link/ether {mac}" in _ip(ns, "link", "show", "eth0")
    assert "10.77.0." in _ip(ns, "addr", "show", "eth0")
    assert "192.0.2.10/24" in _ip(ns, "addr", "show", "net1")
    assert sorted(os.listdir(tmp_path / "cache" / "results")) == [
        f"podnet-{cid}-eth0" for cid in [p.name for p in (tmp_path / "cache").iterdir() if p.is_file()]
    ] + [f"sidenet-{p.name}-net1" for p in (tmp_path / "cache").iterdir() if p.is_file()]

    check = run_cnitool(cnitool, ["check", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin, env=env)
    assert check.returncode == 0, check.stderr
    status = run_cnitool(cnitool, ["status", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert status.returncode == 0, status.stderr

    # cnitool gc passes no valid attachments: every cached attachment of the network is deleted
    gc = run_cnitool(cnitool, ["gc", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert gc.returncode == 0, gc.stderr
    assert "eth0" not in _ip(ns, "link")
    assert "net1" not in _ip(ns, "link")
    assert os.listdir(tmp_path / "ipam" / "podnet") == ["last_reserved_ip.0", "lock"] or not any(
        f.startswith("10.") for f in os.listdir(tmp_path / "ipam" / "podnet")
    )
    # host-device gave the veth back to the host
    assert subprocess.run(["ip", "link", "show", veth], capture_output=True, check=False).returncode == 0

    again = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin, env=env)
    assert again.returncode == 0, again.stderr
    for _ in range(2):  # DEL is idempotent: the second one finds no cache and succeeds
        rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin, env=env)
        assert rm.returncode == 0, rm.stderr
    assert "eth0" not in _ip(ns, "link")
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_file()]
    assert not any(f.startswith("10.") for f in os.listdir(tmp_path / "ipam" / "podnet"))


def test_failed_add_rolls_back_real_plugins(tmp_path, shim_bin, netns, cnitool):
    ns = netns()
    broken = {"cniVersion": "1.0.0", "name": "broken", "type": "host-device", "device": "does-not-exist0"}
    net_dir = shim_net_dir(tmp_path, [cluster_network(tmp_path), broken])
    add = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert add.returncode != 0
    assert 'error adding container to network "broken"' in add.stderr
    assert "eth0" not in _ip(ns, "link")
    assert not any(f.startswith("10.") for f in os.listdir(tmp_path / "ipam" / "podnet"))
    # the delegate cache stays for the runtime's DEL, which then succeeds
    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr


def test_recorder_sees_sorted_stdin_per_delegate_env_and_reverse_del(tmp_path, shim_bin, netns):
    ns = netns()
    log = tmp_path / "calls.jsonl"
    delegates: list[dict[str, Any]] = [
        {
            "cniVersion": "1.0.0",
            "name": "first",
            "type": "recorder",
            "logFile": str(log),
            "capabilities": {"mac": True},
        },
        {
            "cniVersion": "0.4.0",
            "name": "second",
            "type": "recorder",
            "logFile": str(log),
            "zeta": 1,
            "alpha": 12345678901234567890,
        },
    ]
    conf = _multus_conf(
        tmp_path,
        shim_bin,
        delegates,
        runtimeConfig={"mac": "02:00:00:00:00:aa", "io.kubernetes.cri.pod-annotations": {"a": "b"}},
    )
    args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=sb;K8S_POD_UID=u1"
    add = run_cni(
        "multus", "ADD", conf, bin_dir=shim_bin, container_id="rec1", netns=ns, ifname="eth0", cni_args=args
    )
    assert add.returncode == 0, add.stdout + add.stderr
    rm = run_cni(
        "multus", "DEL", conf, bin_dir=shim_bin, container_id="rec1", netns=ns, ifname="eth0", cni_args=args
    )
    assert rm.returncode == 0, rm.stdout
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["command"], c["env"]["CNI_IFNAME"], c["stdin"]["name"]) for c in calls] == [
        ("ADD", "eth0", "first"),
        ("ADD", "net1", "second"),
        ("DEL", "net1", "second"),
        ("DEL", "eth0", "first"),
    ]
    first_add, second_add = calls[0], calls[1]
    assert first_add["stdin"]["runtimeConfig"] == {"mac": "02:00:00:00:00:aa"}
    assert "runtimeConfig" not in second_add["stdin"]
    assert second_add["stdin"]["cniVersion"] == "0.4.0"
    assert second_add["env"]["CNI_ARGS"] == (
        "IgnoreUnknown=true;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=sb;K8S_POD_UID=u1"
    )
    assert second_add["env"]["CNI_CONTAINERID"] == "rec1" and second_add["env"]["CNI_NETNS"] == ns
    assert second_add["env"]["CNI_PATH"].split(":")[0] == str(shim_bin)
    assert calls[2]["stdin"]["prevResult"]["cniVersion"] == "0.4.0"
    assert calls[3]["stdin"]["prevResult"]["interfaces"][0]["name"] == "eth0"


def test_recorder_stdin_bytes_are_sorted_and_lossless(tmp_path, shim_bin, netns):
    """The recorder decodes stdin; here a tiny delegate keeps the raw bytes to check them exactly."""
    dump = tmp_path / "stdin.bin"
    script = shim_bin / "rawdump"
    script.write_text(
        "#!/bin/sh\n"
        f'[ "$CNI_COMMAND" = VERSION ] && {{ echo \'{{"cniVersion":"1.0.0","supportedVersions":["1.0.0"]}}\'; exit 0; }}\n'
        f'cat > {dump}; echo \'{{"cniVersion":"1.0.0"}}\'\n'
    )
    script.chmod(0o755)
    raw = {
        "cniVersion": "1.0.0",
        "name": "raw",
        "type": "rawdump",
        "z": {"b": 1, "a": 2},
        "big": 12345678901234567890,
    }
    conf = _multus_conf(tmp_path, shim_bin, [raw])
    add = run_cni("multus", "ADD", conf, bin_dir=shim_bin, container_id="raw1", netns=netns(), ifname="eth0")
    assert add.returncode == 0, add.stdout
    assert dump.read_bytes() == (
        b'{"big":12345678901234567890,"cniVersion":"1.0.0","name":"raw","type":"rawdump","z":{"a":2,"b":1}}'
    )


def test_each_plugin_binary_is_asked_its_version_once_until_it_is_replaced(
    tmp_path, shim_bin, netns, cnitool
):
    """Thin mode keeps each real plugin's VERSION answer under cniDir/versions: a later ADD goes by
    it (a doctored answer makes the ADD refuse the network) until the binary is replaced."""
    ns = netns()
    net_dir = shim_net_dir(tmp_path, [cluster_network(tmp_path)])

    def cni(verb: str) -> CniRun:
        return run_cnitool(cnitool, [verb, "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)

    assert (add := cni("add")).returncode == 0, add.stderr
    answers = {p.name.split(".")[0]: p for p in (tmp_path / "cache" / "versions").iterdir()}
    assert sorted(answers) == ["ptp", "tuning"]  # host-local is ptp's IPAM: ptp runs it, we do not
    real = subprocess.run(
        [str(shim_bin / "ptp")], env={"CNI_COMMAND": "VERSION"}, input=b"{}", capture_output=True, check=True
    )
    assert (
        json.loads(answers["ptp"].read_bytes())["supportedVersions"]
        == json.loads(real.stdout)["supportedVersions"]
    )
    assert cni("del").returncode == 0

    answers["ptp"].write_text(json.dumps({"cniVersion": "1.0.0", "supportedVersions": ["0.1.0"]}))
    refused = cni("add")
    assert refused.returncode != 0 and "only all support" in refused.stdout + refused.stderr

    upgrade = shim_bin / ".ptp.new"  # an upgrade installs a new file under the same name
    shutil.copy2(shim_bin / "ptp", upgrade)
    os.replace(upgrade, shim_bin / "ptp")
    assert (again := cni("add")).returncode == 0, again.stderr
    assert cni("del").returncode == 0
