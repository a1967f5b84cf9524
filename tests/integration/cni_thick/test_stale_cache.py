"""Spec 17.3's decisive regression test through the real shim, daemon and kube-apiserver.

The daemon's informers hold the old Pod (no managed entries) and have never seen the new shadow
NAD, while the API server holds the patched Pod and the shadow. The informers are frozen through
the daemon's test hook right after they saw the old Pod, so the staleness is certain, not a race.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed.apiobjects import annotations_of, meta
from testbed.cni_daemon import DAEMON_USER, shim_conf
from testbed.cni_objects import bind_by_hand, create_nad, create_pod
from testbed.waiting import wait_for
from tests.support.cni_daemon import pod_args, run_shim

pytestmark = [pytest.mark.integration]

PCI = "0000:03:00.1"
RAIL_IPAM = {
    "type": "static",
    "addresses": [{"address": "192.0.2.10/24"}],
    "routes": [{"dst": "198.51.100.0/24"}],
}


def _stale_setup(testbed, ns: str, cni_daemon, thick_bin: Path, tmp_path: Path, *, live: bool):
    daemon = cni_daemon(
        {"cniDir": str(tmp_path / "cache"), "binDir": str(thick_bin), "liveNetworkConfigOnAdd": live}
    )
    api = testbed.api_client
    pod = create_pod(api, ns, "workload", testbed.node_name, {})
    key = f"{ns}/workload"
    old_version = wait_for(
        lambda: daemon.informers()["pod"].get(key), 20, what=f"the daemon's Pod informer to see {key}"
    )
    daemon.freeze_informers()
    uid = pod["metadata"]["uid"]
    log = tmp_path / "calls.jsonl"
    sriov_conf = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "rail-a",
            "type": "sriov",
            "deviceID": PCI,
            "ipam": RAIL_IPAM,
            "logFile": str(log),
        },
        separators=(",", ":"),
    )
    shadow, patched = bind_by_hand(api, pod, testbed.node_name, sriov_conf)
    assert meta(patched).resource_version != old_version
    conf = shim_conf(
        daemon,
        delegates=[{"cniVersion": "1.0.0", "name": "podnet", "type": "recorder", "logFile": str(log)}],
    )
    return daemon, conf, uid, shadow, old_version, log


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _release(testbed, ns: str, name: str) -> None:
    client.CustomObjectsApi(testbed.api_client).patch_namespaced_custom_object(
        "k8s.cni.cncf.io",
        "v1",
        ns,
        "network-attachment-definitions",
        name,
        {"metadata": {"finalizers": None}},
    )


def test_live_reads_run_the_sriov_delegate_despite_stale_informers(
    testbed, k8s_namespace, cni_daemon, thick_bin, tmp_path
):
    ns = k8s_namespace
    daemon, conf, uid, shadow, old_version, log = _stale_setup(
        testbed, ns, cni_daemon, thick_bin, tmp_path, live=True
    )
    mark = testbed.audit.mark()
    add = run_shim(thick_bin, "ADD", conf, "stale1", pod_args(ns, "workload", uid))
    assert add.returncode == 0, add.stdout + add.stderr

    calls = _calls(log)
    assert [(c["command"], c["stdin"]["name"], c["env"]["CNI_IFNAME"]) for c in calls] == [
        ("ADD", "podnet", "eth0"),
        ("ADD", "rail-a", "dra0"),
    ]
    sriov = calls[1]["stdin"]
    assert sriov["deviceID"] == PCI
    assert sriov["ipam"] == RAIL_IPAM

    # (4) the daemon read the Pod and the NAD live and never touched DRA objects
    events = testbed.audit.wait_for_count(1, since=mark, user=DAEMON_USER, verb="update")
    asked = [e for e in testbed.audit.events(since=mark, user=DAEMON_USER)]
    assert not [e for e in asked if e.resource in ("resourceclaims", "resourceslices")]
    got = {(e.verb, e.resource, e.name) for e in asked}
    assert ("get", "pods", "workload") in got
    assert ("get", "network-attachment-definitions", shadow["name"]) in got
    assert events[0].subresource == "status"

    # (5) the shared caches still hold what they held: the old Pod, no shadow
    cached = daemon.informers()
    assert cached["pod"][f"{ns}/workload"] == old_version
    assert f"{ns}/{shadow['name']}" not in cached["nad"]
    assert daemon.metric("cni_shim_daemon_live_api_reads_total", kind="nad") >= 1
    assert daemon.metric("cni_shim_daemon_cache_reads_total", kind="pod", result="hit") == 0
    assert daemon.metric("cni_shim_daemon_requests_total", command="ADD", result="ok") == 1
    (logged,) = [e for e in daemon.logs() if e.get("msg") == "ADD ok"]
    assert logged["containerID"] == "stale1"
    assert logged["pod"] == f"{ns}/workload"
    assert logged["uid"] == uid
    assert logged["ifname"] == "eth0"

    live = client.CoreV1Api(testbed.api_client).read_namespaced_pod("workload", ns)
    status = json.loads(annotations_of(live)[keys.NETWORK_STATUS_ANNOTATION])
    assert [s["name"] for s in status] == ["podnet", f"{ns}/{shadow['name']}"]
    # Without a netns: the real static IPAM the shim runs after the managed delegate's DEL refuses
    # this test's netns (the plugin's own); a kubelet's DEL never names the plugin's netns.
    rm = run_shim(thick_bin, "DEL", conf, "stale1", pod_args(ns, "workload", uid), netns="")
    assert rm.returncode == 0, rm.stdout
    _release(testbed, ns, shadow["name"])


def test_without_live_reads_the_stale_cache_gives_a_primary_only_pod(
    testbed, k8s_namespace, cni_daemon, thick_bin, tmp_path
):
    """Documents the bug live reads fix: Multus-style informer reads succeed with only the primary."""
    ns = k8s_namespace
    daemon, conf, uid, shadow, old_version, log = _stale_setup(
        testbed, ns, cni_daemon, thick_bin, tmp_path, live=False
    )
    add = run_shim(thick_bin, "ADD", conf, "stale2", pod_args(ns, "workload", uid))
    assert add.returncode == 0, add.stdout + add.stderr
    assert [(c["command"], c["stdin"]["name"]) for c in _calls(log)] == [("ADD", "podnet")]
    assert daemon.metric("cni_shim_daemon_cache_reads_total", kind="pod", result="hit") == 1
    assert daemon.metric("cni_shim_daemon_live_api_reads_total", kind="nad") == 0
    assert daemon.informers()["pod"][f"{ns}/workload"] == old_version
    rm = run_shim(thick_bin, "DEL", conf, "stale2", pod_args(ns, "workload", uid))
    assert rm.returncode == 0, rm.stdout
    _release(testbed, ns, shadow["name"])


def test_a_failed_live_read_fails_the_add_and_never_falls_back_to_the_cache(
    testbed, k8s_namespace, cni_daemon, thick_bin, tmp_path
):
    """The daemon may list and watch NADs but not GET one: its cache has the NAD, the live read is refused."""
    user = "cni-shim-daemon-nogets"
    kubeconfig = testbed.issue_identity(user, user)
    testbed.grant(
        user,
        [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {
                "apiGroups": ["k8s.cni.cncf.io"],
                "resources": ["network-attachment-definitions"],
                "verbs": ["list", "watch"],
            },
        ],
    )
    ns = k8s_namespace
    api = testbed.api_client
    log = tmp_path / "calls.jsonl"
    recorder = {"cniVersion": "1.0.0", "type": "recorder", "logFile": str(log)}
    create_nad(api, ns, {"metadata": {"name": "side"}, "spec": {"config": json.dumps(recorder)}})
    pod = create_pod(api, ns, "p", testbed.node_name, {keys.NETWORKS_ANNOTATION: "side"})
    daemon = cni_daemon(
        {
            "cniDir": str(tmp_path / "cache"),
            "binDir": str(thick_bin),
            "liveNetworkConfigOnAdd": True,
            "kubeconfig": str(kubeconfig),
        }
    )
    wait_for(lambda: f"{ns}/side" in daemon.informers()["nad"], 20, what="the NAD informer to hold the NAD")
    conf = shim_conf(daemon, delegates=[{**recorder, "name": "podnet"}])
    add = run_shim(thick_bin, "ADD", conf, "nogets", pod_args(ns, "p", pod["metadata"]["uid"]))
    assert add.returncode == 1
    error = json.loads(add.stdout)
    assert error["details"] == "KubeApiRefused"
    assert "403" in error["msg"]
    assert _calls(log) == []  # not even the primary ran
    assert daemon.metric("cni_shim_daemon_requests_total", command="ADD", result="KubeApiRefused") == 1
