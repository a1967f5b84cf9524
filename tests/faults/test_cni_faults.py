"""CNI-side faults (spec 11) with the real shim, real plugins and real network namespaces.

Covered elsewhere and not repeated here (the matrix README names them):
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
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.bed.waiting import wait_for
from tests.integration.cni_shim.test_real_plugins import _cluster, _shim_conflist, shim_bin
from tests.support.cni import run_cnitool
from tests.support.cni_daemon import pod_args, run_shim, shim_conf
from tests.support.faultmatrix import NA, PASS

pytestmark = [pytest.mark.netns, pytest.mark.faults]

__all__ = ["shim_bin"]

TITLE = "CNI: boundary x fault (real shim and daemon, real plugins, host-local IPAM)"
ROWS = ("delegate ADD", "IPAM ADD", "DEL")
COLUMNS = ("plugin error", "daemon kill+restart", "cache loss")
RAIL_IP = "10.78.0.2"


def _links(ns: str) -> set[str]:
    out = subprocess.run(
        ["ip", "-n", Path(ns).name, "-j", "link"], capture_output=True, text=True, check=True
    ).stdout
    return {link["ifname"] for link in json.loads(out)}


def _allocated(ipam: Path, network: str) -> dict[str, str]:
    """host-local's reservations: IP -> the container ID holding it."""
    d = ipam / network
    if not d.exists():
        return {}
    return {
        f.name: f.read_text().splitlines()[0]
        for f in d.iterdir()
        if f.name[0].isdigit() and not f.name.startswith("last_reserved_ip")
    }


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
    net_dir = _shim_conflist(tmp_path, [_cluster(tmp_path), _rail(tmp_path)])
    # Another container holds the rail's only address: the second delegate's IPAM fails.
    (ipam / "railnet").mkdir(parents=True)
    (ipam / "railnet" / RAIL_IP).write_text("someone-else\r\neth9")

    add = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert add.returncode != 0
    assert "no IP addresses available" in add.stderr, add.stderr
    # rolled back: the first network's interface and address are gone, the holder is untouched
    assert {"eth0", "net1"}.isdisjoint(_links(ns))
    assert _allocated(ipam, "podnet") == {}
    assert _allocated(ipam, "railnet") == {RAIL_IP: "someone-else"}

    # the holder goes; kubelet's retry (the runtime DELs the failed sandbox, then ADDs again)
    (ipam / "railnet" / RAIL_IP).unlink()
    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    again = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert again.returncode == 0, again.stderr
    assert {"eth0", "net1"} <= _links(ns)
    podnet, railnet = _allocated(ipam, "podnet"), _allocated(ipam, "railnet")
    assert len(podnet) == 1 and list(railnet) == [RAIL_IP]
    assert set(podnet.values()) == set(railnet.values())  # both held by this container, once each

    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    assert _allocated(ipam, "podnet") == {} and _allocated(ipam, "railnet") == {}
    _record(fault_matrix, "IPAM ADD", "plugin error")


def test_delegate_failure_mid_add_rolls_back_and_the_retry_succeeds(
    tmp_path, shim_bin, netns, cnitool, fault_matrix
) -> None:
    ns = netns()
    ipam = tmp_path / "ipam"
    state = tmp_path / "faulty.json"
    flaky = _flaky(state, {"command": "ADD", "call": 1, "mode": "fail", "code": 11, "msg": "injected"})
    net_dir = _shim_conflist(tmp_path, [_cluster(tmp_path), flaky])

    add = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert add.returncode != 0 and "injected" in add.stderr, add.stderr
    assert "eth0" not in _links(ns) and _allocated(ipam, "podnet") == {}

    again = run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert again.returncode == 0, again.stderr
    assert "eth0" in _links(ns) and len(_allocated(ipam, "podnet")) == 1
    assert json.loads(state.read_text())["ADD"] == 2
    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    assert _allocated(ipam, "podnet") == {}
    _record(fault_matrix, "delegate ADD", "plugin error")


def test_cache_loss_del_succeeds_and_leaks_only_its_own_ipam_reservation(
    tmp_path, shim_bin, netns, cnitool, fault_matrix
) -> None:
    """Spec 11's known limit, made explicit: with the delegate cache lost and no Pod to rebuild
    from, DEL cannot know what was attached. It succeeds (so the sandbox can go, as in Multus)
    and touches nothing: the container's own IPAM reservation stays behind, never reused for
    another container, until an operator removes it. Nothing is rebuilt from current config."""
    ipam = tmp_path / "ipam"
    cache = tmp_path / "cache"
    net_dir = _shim_conflist(tmp_path, [_cluster(tmp_path)])
    first = netns()
    assert run_cnitool(cnitool, ["add", "shimnet", first], net_dir=net_dir, bin_dir=shim_bin).returncode == 0
    ((leaked_ip, holder),) = _allocated(ipam, "podnet").items()

    shutil.rmtree(cache)  # the host cache directory was lost (not mounted persistently)
    rm = run_cnitool(cnitool, ["del", "shimnet", first], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    assert _allocated(ipam, "podnet") == {leaked_ip: holder}
    assert "eth0" in _links(first)  # gone only with the sandbox's network namespace

    second = netns()
    add = run_cnitool(cnitool, ["add", "shimnet", second], net_dir=net_dir, bin_dir=shim_bin)
    assert add.returncode == 0, add.stderr
    reservations = _allocated(ipam, "podnet")
    assert len(reservations) == 2 and reservations[leaked_ip] == holder  # no double assignment
    assert run_cnitool(cnitool, ["del", "shimnet", second], net_dir=net_dir, bin_dir=shim_bin).returncode == 0
    assert _allocated(ipam, "podnet") == {leaked_ip: holder}
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
    conf = shim_conf(daemon, delegates=[_cluster(tmp_path), hanging])

    def calls() -> dict[str, int]:
        return json.loads(state.read_text() or "{}") if state.exists() else {}

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(run_shim, thick_bin, "ADD", conf, cid, args, ns)
        wait_for(lambda: calls().get("ADD") == 1, 30, what="the second delegate's ADD to hang")
        assert len(_allocated(ipam, "podnet")) == 1
        daemon.kill()
        add = pending.result(60)
    assert add.returncode == 1 and json.loads(add.stdout)["msg"].startswith("DaemonUnavailable:"), add.stdout

    daemon.start()
    rm = run_shim(thick_bin, "DEL", conf, cid, args, ns)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert _allocated(ipam, "podnet") == {} and "eth0" not in _links(ns)
    again = run_shim(thick_bin, "ADD", conf, cid, args, ns)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "eth0" in _links(ns) and len(_allocated(ipam, "podnet")) == 1
    _record(fault_matrix, "delegate ADD", "daemon kill+restart")

    daemon.kill()
    daemon.start()
    rm = run_shim(thick_bin, "DEL", conf, cid, args, ns)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert _allocated(ipam, "podnet") == {} and "eth0" not in _links(ns)
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
    conf = shim_conf(daemon, delegates=[_cluster(tmp_path), _rail(tmp_path)])
    (ipam / "railnet").mkdir(parents=True)
    with (ipam / "railnet" / "lock").open("w") as lock, ThreadPoolExecutor(1) as pool:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pending = pool.submit(run_shim, thick_bin, "ADD", conf, cid, args, ns)
        wait_for(
            lambda: "host-local" in _group_commands(daemon.proc.pid), 30, what="the rail's IPAM to block"
        )
        assert len(_allocated(ipam, "podnet")) == 1
        daemon.kill()
        add = pending.result(60)
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert add.returncode == 1 and json.loads(add.stdout)["msg"].startswith("DaemonUnavailable:"), add.stdout
    assert _allocated(ipam, "railnet") == {}  # the killed IPAM call allocated nothing

    daemon.start()
    rm = run_shim(thick_bin, "DEL", conf, cid, args, ns)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert _allocated(ipam, "podnet") == {} and _allocated(ipam, "railnet") == {}
    again = run_shim(thick_bin, "ADD", conf, cid, args, ns)
    assert again.returncode == 0, again.stdout + again.stderr
    assert {"eth0", "net1"} <= _links(ns) and list(_allocated(ipam, "railnet")) == [RAIL_IP]
    assert run_shim(thick_bin, "DEL", conf, cid, args, ns).returncode == 0
    assert _allocated(ipam, "podnet") == {} and _allocated(ipam, "railnet") == {}
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
    net_dir = _shim_conflist(tmp_path, [_cluster(tmp_path), flaky])
    conflist = net_dir / "10-shim.conflist"
    conf = json.loads(conflist.read_text())
    conf["plugins"][0]["retryDeleteOnError"] = retry_delete_on_error
    conflist.write_text(json.dumps(conf))
    assert run_cnitool(cnitool, ["add", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin).returncode == 0

    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode != 0 and "injected" in rm.stderr, rm.stderr
    assert _allocated(ipam, "podnet") == {} and "eth0" not in _links(ns)
    rm = run_cnitool(cnitool, ["del", "shimnet", ns], net_dir=net_dir, bin_dir=shim_bin)
    assert rm.returncode == 0, rm.stderr
    assert json.loads(state.read_text())["DEL"] == (2 if retry_delete_on_error else 1)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_file()]
    _record(fault_matrix, "DEL", "plugin error")
