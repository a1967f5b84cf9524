"""Pod Events from the real daemon on the real API server (issue #18 point 5): one AddedInterface
Event per ADD naming every attached interface and NoNetworkFound for a missing NAD, written after
the reply; podEvents: false in the daemon config writes none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed.cni_daemon import DAEMON_USER, shim_conf
from testbed.cni_objects import create_nad, create_pod
from testbed.waiting import wait_for
from tests.support.cni_daemon import pod_args, run_shim

pytestmark = [pytest.mark.integration, pytest.mark.netns]

RESULT = {
    "interfaces": [{"name": "net1"}],
    "ips": [{"address": "10.8.1.4/24", "interface": 0}],
}


def _pod_events(testbed, ns: str) -> list[Any]:
    return [
        e
        for e in client.CoreV1Api(testbed.api_client).list_namespaced_event(ns).items
        if e.involved_object.name == "workload"
    ]


def _setup(testbed, ns: str, cni_daemon, thick_bin: Path, tmp_path: Path, selects: str, **daemon_keys: Any):
    recorder = {"cniVersion": "1.0.0", "type": "recorder", "logFile": str(tmp_path / "calls.jsonl")}
    create_nad(
        testbed.api_client,
        ns,
        {"metadata": {"name": "net-a"}, "spec": {"config": json.dumps({**recorder, "result": RESULT})}},
    )
    daemon = cni_daemon({"cniDir": str(tmp_path / "cache"), "binDir": str(thick_bin), **daemon_keys})
    pod = create_pod(
        testbed.api_client, ns, "workload", testbed.node_name, {keys.NETWORKS_ANNOTATION: selects}
    )
    key = f"{ns}/workload"
    wait_for(lambda: daemon.informers()["pod"].get(key), 20, what=f"the daemon's Pod informer to see {key}")
    conf = shim_conf(daemon, delegates=[{**recorder, "name": "podnet"}])
    return daemon, conf, pod


def test_add_records_multus_events_on_the_pod(testbed, k8s_namespace, cni_daemon, thick_bin, netns, tmp_path):
    ns = k8s_namespace
    _daemon, conf, pod = _setup(testbed, ns, cni_daemon, thick_bin, tmp_path, "net-a")
    add = run_shim(thick_bin, "ADD", conf, "ev1", pod_args(ns, "workload", pod["metadata"]["uid"]), netns())
    assert add.returncode == 0, add.stdout + add.stderr
    got = wait_for(lambda: _pod_events(testbed, ns), 10, what="the Pod Event")
    # One Event write per ADD: every interface's Multus text, in delegate order.
    assert [(e.type, e.reason, e.message) for e in got] == [
        ("Normal", "AddedInterface", f"Add eth0 [] from podnet; Add net1 [10.8.1.4/24] from {ns}/net-a"),
    ]
    for e in got:
        assert e.source.component == "multus"
        assert e.reporting_component == "multus"
        assert e.count == 1
        ref = e.involved_object
        assert (ref.kind, ref.namespace, ref.name, ref.uid) == ("Pod", ns, "workload", pod["metadata"]["uid"])
    writes = testbed.audit.wait_for_count(1, user=DAEMON_USER, resource="events", namespace=ns)
    assert [(w.verb, w.code) for w in writes] == [("create", 201)]


def test_a_missing_nad_is_a_no_network_found_warning(
    testbed, k8s_namespace, cni_daemon, thick_bin, netns, tmp_path
):
    ns = k8s_namespace
    _daemon, conf, pod = _setup(testbed, ns, cni_daemon, thick_bin, tmp_path, "missing")
    add = run_shim(thick_bin, "ADD", conf, "ev2", pod_args(ns, "workload", pod["metadata"]["uid"]), netns())
    assert add.returncode != 0
    (got,) = wait_for(lambda: _pod_events(testbed, ns), 10, what="the NoNetworkFound Event")
    assert (got.type, got.reason) == ("Warning", "NoNetworkFound")
    # The daemon's informer view, as Multus thick's lister words it.
    assert got.message == (
        f"cannot find a network-attachment-definition (missing) in namespace ({ns}): "
        'networkattachmentdefinition.k8s.cni.cncf.io "missing" not found'
    )


def test_pod_events_false_in_the_daemon_config_writes_none(
    testbed, k8s_namespace, cni_daemon, thick_bin, netns, tmp_path
):
    ns = k8s_namespace
    daemon, conf, pod = _setup(testbed, ns, cni_daemon, thick_bin, tmp_path, "net-a", podEvents=False)
    mark = testbed.audit.mark()
    add = run_shim(thick_bin, "ADD", conf, "ev3", pod_args(ns, "workload", pod["metadata"]["uid"]), netns())
    assert add.returncode == 0, add.stdout + add.stderr
    # The ADD's status write is logged; an Event would have been queued before the answer left.
    testbed.audit.wait_for_count(1, since=mark, user=DAEMON_USER, verb="update")
    daemon.stop()  # drains the queue: anything queued is written before the daemon exits
    assert testbed.audit.events(since=mark, user=DAEMON_USER, resource="events") == []
    assert _pod_events(testbed, ns) == []
