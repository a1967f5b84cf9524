"""A live ADD starts its NAD GETs from the informer's copy of the Pod, through the real shim, daemon and API server.

Fresh copy: the ADD costs one Pod GET and one GET per NAD the Pod selects, as without the prefetch.
Stale copy (informers frozen, then the Pod's selections changed): the ADD still attaches exactly
the live Pod's NADs; the guesses the live Pod dropped are at most one wasted GET each.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed.cni_daemon import DAEMON_USER, shim_conf
from testbed.cni_objects import create_nad, create_pod
from testbed.waiting import wait_for
from tests.support.cni_daemon import pod_args, run_shim

pytestmark = [pytest.mark.integration]


def _setup(testbed, ns: str, cni_daemon, thick_bin: Path, tmp_path: Path, selects: str):
    log = tmp_path / "calls.jsonl"
    recorder = {"cniVersion": "1.0.0", "type": "recorder", "logFile": str(log)}
    for name in ("net-a", "net-b", "net-c"):
        create_nad(
            testbed.api_client, ns, {"metadata": {"name": name}, "spec": {"config": json.dumps(recorder)}}
        )
    daemon = cni_daemon(
        {"cniDir": str(tmp_path / "cache"), "binDir": str(thick_bin), "liveNetworkConfigOnAdd": True}
    )
    pod = create_pod(
        testbed.api_client, ns, "workload", testbed.node_name, {keys.NETWORKS_ANNOTATION: selects}
    )
    key = f"{ns}/workload"
    wait_for(lambda: daemon.informers()["pod"].get(key), 20, what=f"the daemon's Pod informer to see {key}")
    conf = shim_conf(daemon, delegates=[{**recorder, "name": "podnet"}])
    return daemon, conf, pod["metadata"]["uid"], log


def _attached(log: Path) -> list[tuple[str, str]]:
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return [(c["stdin"]["name"], c["env"]["CNI_IFNAME"]) for c in calls if c["command"] == "ADD"]


def _daemon_gets(testbed, mark: int) -> Counter[tuple[str, str]]:
    # The ADD's answer follows its status write; its audit event says the request is fully logged.
    testbed.audit.wait_for_count(1, since=mark, user=DAEMON_USER, verb="update")
    gets = testbed.audit.events(since=mark, user=DAEMON_USER, verb="get")
    # Live means a consistent read: no resourceVersion (a "0" would be served from the watch cache).
    assert [e.uri for e in gets if "?" in e.uri] == []
    return Counter((e.resource, e.name) for e in gets)


def _add_and_del(thick_bin: Path, conf: dict[str, Any], cid: str, ns: str, uid: str) -> None:
    add = run_shim(thick_bin, "ADD", conf, cid, pod_args(ns, "workload", uid))
    assert add.returncode == 0, add.stdout + add.stderr
    rm = run_shim(thick_bin, "DEL", conf, cid, pod_args(ns, "workload", uid))
    assert rm.returncode == 0, rm.stdout + rm.stderr


def test_a_fresh_informer_copy_costs_one_pod_get_and_one_get_per_nad(
    testbed, k8s_namespace, cni_daemon, thick_bin, tmp_path
):
    ns = k8s_namespace
    _, conf, uid, log = _setup(testbed, ns, cni_daemon, thick_bin, tmp_path, "net-a, net-b")
    mark = testbed.audit.mark()
    _add_and_del(thick_bin, conf, "fresh1", ns, uid)
    assert _attached(log) == [("podnet", "eth0"), ("net-a", "net1"), ("net-b", "net2")]
    assert _daemon_gets(testbed, mark) == Counter(
        {
            ("pods", "workload"): 1,
            ("network-attachment-definitions", "net-a"): 1,
            ("network-attachment-definitions", "net-b"): 1,
        }
    )


def test_a_stale_informer_copy_naming_other_nads_still_attaches_exactly_the_live_pod_s(
    testbed, k8s_namespace, cni_daemon, thick_bin, tmp_path
):
    ns = k8s_namespace
    daemon, conf, uid, log = _setup(testbed, ns, cni_daemon, thick_bin, tmp_path, "net-a, net-b")
    stale_version = daemon.informers()["pod"][f"{ns}/workload"]
    daemon.freeze_informers()
    client.CoreV1Api(testbed.api_client).patch_namespaced_pod(
        "workload", ns, {"metadata": {"annotations": {keys.NETWORKS_ANNOTATION: "net-c, net-b"}}}
    )
    mark = testbed.audit.mark()
    _add_and_del(thick_bin, conf, "stale1", ns, uid)
    assert _attached(log) == [("podnet", "eth0"), ("net-c", "net1"), ("net-b", "net2")]
    gets = _daemon_gets(testbed, mark)
    assert gets[("pods", "workload")] == 1
    assert gets[("network-attachment-definitions", "net-b")] == 1  # the guess it needed, reused
    assert gets[("network-attachment-definitions", "net-c")] == 1  # the one the guess missed, read then
    # The stale copy did start a GET of net-a, which the live Pod no longer selects: one wasted read.
    testbed.audit.wait_for_count(
        1, since=mark, user=DAEMON_USER, verb="get", resource="network-attachment-definitions", name="net-a"
    )
    assert _daemon_gets(testbed, mark)[("network-attachment-definitions", "net-a")] == 1
    assert daemon.informers()["pod"][f"{ns}/workload"] == stale_version
