"""Delegates at once against the real IPAM plugins (issue 36): six attachments of one Pod draw
from one pool at the same time (`parallelOrdinaryDelegates`, the real shim executable and real Go
plugins in a real network namespace). Each plugin's own locking must give six distinct addresses,
and the DEL that runs them at once again must give every one back."""

from __future__ import annotations

import ipaddress
import json
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cni import cluster_network, host_local_allocations, run_cni
from tests.support.cni_daemon import shim_bin_dir

pytestmark = [pytest.mark.integration, pytest.mark.netns]

RAILS = 6
POOL = "10.124.0.0/24"


@pytest.fixture
def devices() -> Iterator[list[str]]:
    """One host veth per rail for host-device to move into the Pod (this bed has no macvlan)."""
    names = [f"wv{secrets.token_hex(3)}" for _ in range(RAILS)]
    for name in names:
        subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p"], check=True)
    yield names
    for name in names:
        subprocess.run(["ip", "link", "del", f"{name}p"], check=False, capture_output=True)


@pytest.fixture
def shim_bin(tmp_path: Path, cni_bin_dir: Path) -> Path:
    return shim_bin_dir(tmp_path / "bin", cni_bin_dir, "cni-shim", recorder_as_sriov=False)


def _addresses(netns: str) -> dict[str, str]:
    out = subprocess.run(
        ["ip", "-n", Path(netns).name, "-j", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    return {
        link["ifname"]: f"{a['local']}/{a['prefixlen']}"
        for link in json.loads(out)
        for a in link.get("addr_info", [])
        if a.get("family") == "inet" and link["ifname"].startswith("net")
    }


def _run(
    shim_bin: Path,
    tmp_path: Path,
    command: str,
    netns: str,
    ipam: Callable[[int], dict[str, Any]],
    devices: list[str],
):
    conf = {
        "cniVersion": "1.0.0",
        "name": "shimnet",
        "type": "cni-shim",
        "cniDir": str(tmp_path / "cache"),
        "binDir": str(shim_bin),
        "parallelOrdinaryDelegates": True,
        "delegates": [
            cluster_network(tmp_path),
            # One network name: host-local's lock and whereabouts' pool are per network.
            *(
                {
                    "cniVersion": "1.0.0",
                    "name": "pool",
                    "type": "host-device",
                    "device": devices[i],
                    "ipam": ipam(i),
                }
                for i in range(RAILS)
            ),
        ],
    }
    return run_cni(
        "cni-shim",
        command,
        conf,
        bin_dir=shim_bin,
        container_id="waves",
        netns=netns,
        ifname="eth0",
        cni_args="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=waves-pod",
    )


def _attach_and_detach(shim_bin, tmp_path, netns, devices, ipam) -> dict[str, str]:
    ns = netns()
    add = _run(shim_bin, tmp_path, "ADD", ns, ipam, devices)
    assert add.returncode == 0, add.stdout + add.stderr
    got = _addresses(ns)
    assert sorted(got) == [f"net{i}" for i in range(1, RAILS + 1)], got
    assert len(set(got.values())) == RAILS, got
    dele = _run(shim_bin, tmp_path, "DEL", ns, ipam, devices)
    assert dele.returncode == 0, dele.stdout + dele.stderr
    assert _addresses(ns) == {}
    return got


def test_host_local_gives_each_rail_its_own_address_and_takes_every_one_back(
    tmp_path, shim_bin, netns, devices
):
    store = tmp_path / "host-local"
    ipam = {"type": "host-local", "dataDir": str(store), "ranges": [[{"subnet": POOL}]]}
    got = _attach_and_detach(shim_bin, tmp_path, netns, devices, lambda i: ipam)
    assert all(ipaddress.ip_interface(a).ip in ipaddress.ip_network(POOL) for a in got.values())
    assert host_local_allocations(store, "pool") == {}


def test_static_addresses_land_on_their_rails(tmp_path, shim_bin, netns, devices):
    def ipam(i: int) -> dict[str, Any]:
        return {"type": "static", "addresses": [{"address": f"10.125.0.{10 + i}/24"}]}

    got = _attach_and_detach(shim_bin, tmp_path, netns, devices, ipam)
    assert got == {f"net{i + 1}": f"10.125.0.{10 + i}/24" for i in range(RAILS)}


def test_whereabouts_gives_each_rail_its_own_address_and_takes_every_one_back(
    tmp_path, shim_bin, netns, devices, whereabouts, testbed
):
    network = f"waves-{secrets.token_hex(3)}"
    ipam = whereabouts.ipam(network, POOL)
    got = _attach_and_detach(shim_bin, tmp_path, netns, devices, lambda i: ipam)
    assert all(ipaddress.ip_interface(a).ip in ipaddress.ip_network(POOL) for a in got.values())
    assert whereabouts.allocations(testbed.api_client, network, POOL) == {}
