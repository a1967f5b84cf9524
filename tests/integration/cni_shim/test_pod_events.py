"""Thin mode's Pod Events on the real API server (issue #18 point 5): the `cni-shim` process
writes Multus's AddedInterface / NoNetworkFound Events before it exits, as the "cni" identity with
only the deployment's RBAC; podEvents: false writes none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed.bed import TestBed
from testbed.cni_daemon import CNI_RULES, CNI_USER
from testbed.cni_objects import create_nad, create_pod
from tests.support.cni import run_cni
from tests.support.cni_daemon import shim_bin_dir

pytestmark = [pytest.mark.integration, pytest.mark.netns]

RESULT = {"interfaces": [{"name": "net1"}], "ips": [{"address": "10.8.2.4/24", "interface": 0}]}


@pytest.fixture(scope="module")
def cni_kubeconfig(testbed: TestBed) -> Path:
    testbed.grant(CNI_USER, CNI_RULES)
    return testbed.kubeconfig_for("cni")


def _run(
    tmp_path: Path,
    cni_bin_dir: Path,
    testbed: TestBed,
    ns: str,
    kubeconfig: Path,
    selects: str,
    sandbox: str,
    **extra: Any,
):
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        shim_bin_dir(bin_dir, cni_bin_dir, "multus")
    recorder = {"cniVersion": "1.0.0", "type": "recorder", "logFile": str(tmp_path / "calls.jsonl")}
    create_nad(
        testbed.api_client,
        ns,
        {"metadata": {"name": "net-a"}, "spec": {"config": json.dumps({**recorder, "result": RESULT})}},
    )
    pod = create_pod(
        testbed.api_client, ns, "workload", testbed.node_name, {keys.NETWORKS_ANNOTATION: selects}
    )
    conf = {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "multus",
        "kubeconfig": str(kubeconfig),
        "cniDir": str(tmp_path / "cache"),
        "binDir": "",
        "delegates": [{**recorder, "name": "podnet"}],
        **extra,
    }
    args = (
        f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME=workload;K8S_POD_UID={pod['metadata']['uid']}"
    )
    return run_cni(
        "multus",
        "ADD",
        conf,
        bin_dir=bin_dir,
        container_id="ev",
        netns=sandbox,
        ifname="eth0",
        cni_args=args,
    ), pod


def _pod_events(testbed: TestBed, ns: str) -> list[Any]:
    items = client.CoreV1Api(testbed.api_client).list_namespaced_event(ns).items
    return sorted((e for e in items if e.involved_object.name == "workload"), key=lambda e: e.message)


def test_thin_add_writes_the_events_before_it_exits(
    testbed, k8s_namespace, cni_kubeconfig, cni_bin_dir, netns, tmp_path
):
    add, pod = _run(tmp_path, cni_bin_dir, testbed, k8s_namespace, cni_kubeconfig, "net-a", netns())
    assert add.returncode == 0, add.stdout + add.stderr
    got = _pod_events(testbed, k8s_namespace)  # written before the process exited: no waiting
    assert [(e.type, e.reason, e.message) for e in got] == [
        (
            "Normal",
            "AddedInterface",
            f"Add eth0 [] from podnet; Add net1 [10.8.2.4/24] from {k8s_namespace}/net-a",
        ),
    ]
    assert {(e.source.component, e.involved_object.uid) for e in got} == {("multus", pod["metadata"]["uid"])}


def test_thin_missing_nad_warns(testbed, k8s_namespace, cni_kubeconfig, cni_bin_dir, netns, tmp_path):
    add, _ = _run(tmp_path, cni_bin_dir, testbed, k8s_namespace, cni_kubeconfig, "missing", netns())
    assert add.returncode != 0
    (got,) = _pod_events(testbed, k8s_namespace)
    assert (got.type, got.reason, got.message) == (
        "Warning",
        "NoNetworkFound",
        f"cannot find a network-attachment-definition (missing) in namespace ({k8s_namespace}): "
        'network-attachment-definitions.k8s.cni.cncf.io "missing" not found',
    )


def test_thin_pod_events_off(testbed, k8s_namespace, cni_kubeconfig, cni_bin_dir, netns, tmp_path):
    mark = testbed.audit.mark()
    add, _ = _run(
        tmp_path, cni_bin_dir, testbed, k8s_namespace, cni_kubeconfig, "net-a", netns(), podEvents=False
    )
    assert add.returncode == 0, add.stdout + add.stderr
    assert _pod_events(testbed, k8s_namespace) == []
    testbed.audit.wait_for_count(1, since=mark, user=CNI_USER, verb="update")
    assert testbed.audit.events(since=mark, user=CNI_USER, resource="events") == []
