"""CNI-side faults (spec 11) with the real shim, real plugins and real network namespaces.

Covered elsewhere and not repeated here (the fault matrix in docs/testing.md names them):
- daemon killed mid-ADD, restarted, DEL from the persisted cache:
  tests/integration/cni_thick/test_daemon_lifecycle.py::test_killed_mid_add_leaves_a_cache_the_restarted_daemon_deletes_from
- daemon restarted between ADD and DEL: ...::test_a_restarted_daemon_serves_del_for_earlier_attachments
- DEL after the Pod, source NAD and shadow are deleted: ...::test_add_recovers_a_missing_uid_live_and_del_after_pod_deletion_reads_nothing
  and tests/integration/cni_shim/test_live_api.py::test_add_reads_live_guards_shadow_writes_status_and_del_survives_deletion
- a failing delegate with host-device rolls back: tests/integration/cni_shim/test_real_plugins.py
"""

from __future__ import annotations

import fcntl
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from testbed.cni_daemon import shim_conf
from testbed.netlinks import ns_links
from testbed.waiting import wait_for
from tests.support.cni import cluster_network, host_local_allocations, run_cnitool, shim_net_dir
from tests.support.cni_daemon import pod_args, run_shim, shim_bin_dir
from tests.support.faultmatrix import NA, PASS

pytestmark = [pytest.mark.netns, pytest.mark.faults]


TITLE = "CNI: boundary x fault (real shim and daemon, real plugins, host-local IPAM)"
ROWS = ("delegate ADD", "IPAM ADD", "DEL")
COLUMNS = ("plugin error", "daemon kill+restart", "cache loss")
RAIL_IP = "10.78.0.2"


@pytest.fixture
def shim_bin(tmp_path: Path, cni_bin_dir: Path) -> Path:
    return shim_bin_dir(tmp_path / "bin", cni_bin_dir, "cni-shim", recorder_as_sriov=False)


def _group_commands(pgid: int) -> set[str]:
    """The command names of the live processes in process group `pgid`."""
    names = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # exited meanwhile
        comm, rest = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        if int(rest[2]) == pgid:
            names.add(comm)
    return names


def _rail(tmp_path: Path) -> dict[str, Any]:
    """A second network whose IPAM range holds exactly one address."""
    return {
        "cniVersion": "1.0.0",
        "name": "railnet",
        "type": "ptp",
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": "10.78.0.0/24", "rangeStart": RAIL_IP, "rangeEnd": RAIL_IP}]],
            "dataDir": str(tmp_path / "ipam"),
        },
    }


def _flaky(state: Path, fault: dict[str, Any]) -> dict[str, Any]:
    """A delegate network whose `faulty` plugin injects `fault`, counting calls in `state`."""
    return {
        "cniVersion": "1.0.0",
        "name": "flaky",
        "type": "faulty",
        "stateFile": str(state),
        "faults": [fault],
    }


def _record(fault_matrix, row: str, column: str) -> None:
    fault_matrix.table(TITLE, ROWS, COLUMNS)
    # A lost cache only matters to the DEL that needs it; ADD writes a fresh one.
    for add_row in ("delegate ADD", "IPAM ADD"):
        fault_matrix.record(TITLE, add_row, "cache loss", NA)
    fault_matrix.record(TITLE, row, column, PASS)


def test_ipam_failure_mid_add_rolls_back_and_the_retry_succeeds(
    tmp_path, shim_bin, netns, cnitool, fault_matrix
) -> None:
    ns = netns()
    ipam = tmp_path / "ipam"
    net_dir = shim_net_dir(tmp_path, [cluster_network(tmp_path), _rail(tmp_path)])
    # Another container holds the rail's only address: the second delegate's IPAM fails.
    (ipam / "railnet").mkdir(parents=True)
    (ipam / "railnet" / RAIL_IP).write_text("someone-else\r\neth9")

    add = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert add.returncode != 0
    assert "no IP addresses available" in add.stderr, add.stderr
    # rolled back: the first network's interface and address are gone, the holder is untouched
    assert {"eth0", "net1"}.isdisjoint(set(ns_links(ns)))
    assert host_local_allocations(ipam, "podnet") == {}
    assert host_local_allocations(ipam, "railnet") == {RAIL_IP: "someone-else"}

    # the holder goes; kubelet's retry (the runtime DELs the failed sandbox, then ADDs again)
    (ipam / "railnet" / RAIL_IP).unlink()
    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    again = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert again.returncode == 0, again.stderr
    assert {"eth0", "net1"} <= set(ns_links(ns))
    podnet, railnet = host_local_allocations(ipam, "podnet"), host_local_allocations(ipam, "railnet")
    assert len(podnet) == 1 and list(railnet) == [RAIL_IP]
    assert set(podnet.values()) == set(railnet.values())  # both held by this container, once each

    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    assert host_local_allocations(ipam, "podnet") == {} and host_local_allocations(ipam, "railnet") == {}
    _record(fault_matrix, "IPAM ADD", "plugin error")


def test_delegate_failure_mid_add_rolls_back_and_the_retry_succeeds(
    tmp_path, shim_bin, netns, cnitool, fault_matrix
) -> None:
    ns = netns()
    ipam = tmp_path / "ipam"
    state = tmp_path / "faulty.json"
    flaky = _flaky(state, {"command": "ADD", "call": 1, "mode": "fail", "code": 11, "msg": "injected"})
    net_dir = shim_net_dir(tmp_path, [cluster_network(tmp_path), flaky])

    add = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert add.returncode != 0 and "injected" in add.stderr, add.stderr
    assert "eth0" not in ns_links(ns) and host_local_allocations(ipam, "podnet") == {}

    again = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert again.returncode == 0, again.stderr
    assert "eth0" in ns_links(ns) and len(host_local_allocations(ipam, "podnet")) == 1
    assert json.loads(state.read_text())["ADD"] == 2
    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    assert host_local_allocations(ipam, "podnet") == {}
    _record(fault_matrix, "delegate ADD", "plugin error")


def test_cache_loss_del_succeeds_and_leaks_only_its_own_ipam_reservation(
    tmp_path, shim_bin, netns, cnitool, fault_matrix
) -> None:
    """Spec 11's known limit, made explicit: with the delegate cache lost and no Pod to rebuild
    from, DEL cannot know what was attached, except the Pod's managed shadows (there are none
    here; tests/integration/cni_shim/test_del_after_cache_loss.py has them). It succeeds (so the sandbox can go, as in Multus)
    and touches nothing: the container's own IPAM reservation stays behind, never reused for
    another container, until an operator removes it. Nothing is rebuilt from current config."""
    ipam = tmp_path / "ipam"
    cache = tmp_path / "cache"
    net_dir = shim_net_dir(tmp_path, [cluster_network(tmp_path)])
    first = netns()
    assert run_cnitool(cnitool, ["add", "shimnet", first], net_dir=net_dir, bin_dir=shim_bin).returncode == 0
    ((leaked_ip, holder),) = host_local_allocations(ipam, "podnet").items()

    shutil.rmtree(cache)  # the host cache directory was lost (not mounted persistently)
    rm = run_cnitool(cnitool, ["del", "shimnet", first], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    assert host_local_allocations(ipam, "podnet") == {leaked_ip: holder}
    assert "eth0" in ns_links(first)  # gone only with the sandbox's network namespace

    second = netns()
    add = run_cnitool(cnitool, ["add", "shimnet", second], net_dir=net_dir, bin_dir=shim_bin)
    assert add.returncode == 0, add.stderr
    reservations = host_local_allocations(ipam, "podnet")
    assert len(reservations) == 2 and reservations[leaked_ip] == holder  # no double assignment
    assert run_cnitool(cnitool, ["del", "shimnet", second], net_dir=net_dir, bin_dir=shim_bin).returncode == 0
    assert host_local_allocations(ipam, "podnet") == {leaked_ip: holder}
    _record(fault_matrix, "DEL", "cache loss")


def test_daemon_killed_mid_add_then_the_runtime_del_and_retry_converge(
    tmp_path, cni_daemon, thick_bin, netns, fault_matrix
) -> None:
    """Thick mode: the daemon dies while the second delegate's ADD runs (the first already holds
    an address). The runtime's DEL of the failed sandbox, served by the restarted daemon from the
    persisted cache, releases it; the retried ADD succeeds; a second kill and restart between ADD
    and DEL still releases everything."""
    ns, cid, args = netns(), "f00d", pod_args("ns", "p")
    ipam, cache, state = tmp_path / "ipam", tmp_path / "cache", tmp_path / "faulty.json"
    daemon = cni_daemon({"cniDir": str(cache), "binDir": str(thick_bin)}, kube=False)
    hanging = _flaky(state, {"command": "ADD", "call": 1, "mode": "hang", "seconds": 30})
    conf = shim_conf(daemon, delegates=[cluster_network(tmp_path), hanging])

    def calls() -> dict[str, int]:
        return json.loads(state.read_text() or "{}") if state.exists() else {}

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(run_shim, thick_bin, "ADD", conf, cid, args, ns)
        wait_for(lambda: calls().get("ADD") == 1, 30, what="the second delegate's ADD to hang")
        assert len(host_local_allocations(ipam, "podnet")) == 1
        daemon.kill()
        add = pending.result(60)
    assert add.returncode == 1 and json.loads(add.stdout)["details"] == "DaemonUnavailable", add.stdout

    daemon.start()
    rm = run_shim(thick_bin, "DEL", conf, cid, args, ns)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert host_local_allocations(ipam, "podnet") == {} and "eth0" not in ns_links(ns)
    again = run_shim(thick_bin, "ADD", conf, cid, args, ns)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "eth0" in ns_links(ns) and len(host_local_allocations(ipam, "podnet")) == 1
    _record(fault_matrix, "delegate ADD", "daemon kill+restart")

    daemon.kill()
    daemon.start()
    rm = run_shim(thick_bin, "DEL", conf, cid, args, ns)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert host_local_allocations(ipam, "podnet") == {} and "eth0" not in ns_links(ns)
    assert not (cache / cid).exists()
    _record(fault_matrix, "DEL", "daemon kill+restart")


def test_ipam_hung_when_the_daemon_dies_is_released_by_the_runtime_del(
    tmp_path, cni_daemon, thick_bin, netns, fault_matrix
) -> None:
    """Thick mode: the daemon (and with it every delegate it runs, as a container restart does)
    is killed while the rail's host-local IPAM waits for its lock (held here). The runtime's DEL,
    served by the restarted daemon from the persisted cache, releases the first network's address,
    and the retried ADD gets the rail's single address."""
    ns, cid, args = netns(), "beef", pod_args("ns", "p")
    ipam, cache = tmp_path / "ipam", tmp_path / "cache"
    daemon = cni_daemon({"cniDir": str(cache), "binDir": str(thick_bin)}, kube=False)
    conf = shim_conf(daemon, delegates=[cluster_network(tmp_path), _rail(tmp_path)])
    (ipam / "railnet").mkdir(parents=True)
    with (ipam / "railnet" / "lock").open("w") as lock, ThreadPoolExecutor(1) as pool:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pending = pool.submit(run_shim, thick_bin, "ADD", conf, cid, args, ns)
        wait_for(
            lambda: "host-local" in _group_commands(daemon.proc.pid), 30, what="the rail's IPAM to block"
        )
        assert len(host_local_allocations(ipam, "podnet")) == 1
        daemon.kill()
        add = pending.result(60)
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert add.returncode == 1 and json.loads(add.stdout)["details"] == "DaemonUnavailable", add.stdout
    assert host_local_allocations(ipam, "railnet") == {}  # the killed IPAM call allocated nothing

    daemon.start()
    rm = run_shim(thick_bin, "DEL", conf, cid, args, ns)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert host_local_allocations(ipam, "podnet") == {} and host_local_allocations(ipam, "railnet") == {}
    again = run_shim(thick_bin, "ADD", conf, cid, args, ns)
    assert again.returncode == 0, again.stdout + again.stderr
    assert {"eth0", "net1"} <= set(ns_links(ns)) and list(host_local_allocations(ipam, "railnet")) == [
        RAIL_IP
    ]
    assert run_shim(thick_bin, "DEL", conf, cid, args, ns).returncode == 0
    assert host_local_allocations(ipam, "podnet") == {} and host_local_allocations(ipam, "railnet") == {}
    _record(fault_matrix, "IPAM ADD", "daemon kill+restart")


@pytest.mark.parametrize("retry_delete_on_error", [False, True])
def test_a_failing_delegate_del_still_releases_the_others_and_the_retry_converges(
    tmp_path, shim_bin, netns, cnitool, fault_matrix, retry_delete_on_error
) -> None:
    """A delegate's DEL fails once: the others are still deleted (the cluster address is freed at
    once) and kubelet's retried DEL succeeds. As in Multus, only with retryDeleteOnError is the
    failed delegate's DEL repeated from the cache; without it the retry finds no cache."""
    ns = netns()
    ipam, state = tmp_path / "ipam", tmp_path / "faulty.json"
    flaky = _flaky(state, {"command": "DEL", "call": 1, "mode": "fail", "code": 11, "msg": "injected"})
    net_dir = shim_net_dir(tmp_path, [cluster_network(tmp_path), flaky])
    conflist = net_dir / "10-shim.conflist"
    conf = json.loads(conflist.read_text())
    conf["plugins"][0]["retryDeleteOnError"] = retry_delete_on_error
    conflist.write_text(json.dumps(conf))
    assert run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin).returncode == 0

    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode != 0 and "injected" in rm.stderr, rm.stderr
    assert host_local_allocations(ipam, "podnet") == {} and "eth0" not in ns_links(ns)
    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    assert json.loads(state.read_text())["DEL"] == (2 if retry_delete_on_error else 1)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_file()]
    _record(fault_matrix, "DEL", "plugin error")
