"""cni-shim against the real kube-apiserver: live Pod/NAD reads, the managed-shadow guard on real
objects, network-status on the live Pod, and DEL from the cache after every object is gone.

The shim authenticates as the bed's "cni" identity (user cni-shim) with only the RBAC a
deployment grants it; the audit log proves which API calls it made.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed.apiobjects import annotations_of, as_object
from testbed.bed import TestBed
from testbed.cluster import NAD_API
from testbed.cni_daemon import CNI_RULES, CNI_USER
from testbed.cni_objects import bind_by_hand, create_nad, create_pod
from testbed.nodecni import ptp_host_local
from tests.support.cni import run_cni
from tests.support.cni_daemon import shim_bin_dir

pytestmark = [pytest.mark.integration, pytest.mark.netns]


@pytest.fixture(scope="module")
def cni_kubeconfig(testbed: TestBed) -> Path:
    testbed.grant(CNI_USER, CNI_RULES)
    return testbed.kubeconfig_for("cni")


@pytest.fixture
def shim_bin(tmp_path: Path, cni_bin_dir: Path) -> Path:
    """The shim installed as `multus`, Multus's own binary name."""
    return shim_bin_dir(tmp_path / "bin", cni_bin_dir, "multus")


def _conf(tmp_path: Path, kubeconfig: Path, log: Path) -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "multus",
        "kubeconfig": str(kubeconfig),
        "cniDir": str(tmp_path / "cache"),
        "binDir": "",
        "delegates": [
            {
                "cniVersion": "1.0.0",
                "name": "podnet",
                "plugins": [
                    ptp_host_local("10.78.0.0/24", tmp_path / "ipam"),
                    {"type": "tuning", "sysctl": {"net.ipv4.conf.all.log_martians": "1"}},
                ],
            }
        ],
        "logLevel": "verbose",
    }


def _shim(shim_bin: Path, command: str, conf: dict[str, Any], cid: str, sandbox: str, args: str):
    return run_cni(
        "multus",
        command,
        conf,
        bin_dir=shim_bin,
        container_id=cid,
        netns=sandbox,
        ifname="eth0",
        cni_args=args,
    )


def _args(ns: str, name: str, uid: str) -> str:
    return f"IgnoreUnknown=1;K8S_POD_NAMESPACE={ns};K8S_POD_NAME={name};K8S_POD_INFRA_CONTAINER_ID=sb;K8S_POD_UID={uid}"


def test_add_reads_live_guards_shadow_writes_status_and_del_survives_deletion(
    testbed, k8s_namespace, cni_kubeconfig, shim_bin, netns, veth, tmp_path
):
    api = testbed.api_client
    ns = k8s_namespace
    log = tmp_path / "sriov-calls.jsonl"
    side = create_nad(
        api,
        ns,
        {
            "metadata": {"name": "side"},
            "spec": {
                "config": json.dumps(
                    {"cniVersion": "1.0.0", **ptp_host_local("10.79.0.0/24", tmp_path / "ipam")}
                )
            },
        },
    )
    assert side["metadata"]["name"] == "side"
    hd_config = {
        "cniVersion": "1.0.0",
        "type": "host-device",
        "device": veth,
        "ipam": {"type": "static", "addresses": [{"address": "192.0.2.20/24"}]},
    }
    create_nad(api, ns, {"metadata": {"name": "hd"}, "spec": {"config": json.dumps(hd_config)}})
    pod = create_pod(api, ns, "workload", testbed.node_name, {})
    uid = pod["metadata"]["uid"]
    sriov_conf = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "rail-a",
            "type": "sriov",
            "deviceID": "0000:03:00.1",
            "logFile": str(log),
        },
        separators=(",", ":"),
    )
    shadow, _ = bind_by_hand(
        api, pod, testbed.node_name, sriov_conf, manual=[{"name": "side"}, {"name": "hd"}]
    )
    conf = _conf(tmp_path, cni_kubeconfig, log)
    sandbox = netns()
    mark = testbed.audit.mark()
    add = _shim(shim_bin, "ADD", conf, "live1", sandbox, _args(ns, "workload", uid))
    assert add.returncode == 0, add.stdout + add.stderr
    assert add.json["ips"][0]["address"].startswith("10.78.0.")

    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["command"], c["env"]["CNI_IFNAME"]) for c in calls] == [("ADD", "dra0")]
    assert calls[0]["stdin"]["deviceID"] == "0000:03:00.1"

    live = client.CoreV1Api(api).read_namespaced_pod("workload", ns)
    status = json.loads(annotations_of(live)[keys.NETWORK_STATUS_ANNOTATION])
    assert [(s["name"], s.get("interface"), s.get("default", False)) for s in status] == [
        ("podnet", "eth0", True),
        (f"{ns}/side", "net1", False),
        (f"{ns}/hd", "net2", False),
        (f"{ns}/{shadow['name']}", "dra0", False),
    ]
    assert status[2]["ips"] == ["192.0.2.20"]
    events = testbed.audit.events(since=mark, user=CNI_USER)
    asked = sorted({(e.verb, e.resource, e.subresource) for e in events})
    assert asked == [
        ("create", "events", ""),  # AddedInterface per attached interface (issue #18 point 5)
        ("get", "network-attachment-definitions", ""),
        ("get", "pods", ""),
        ("update", "pods", "status"),
    ]
    assert all(e.code < 400 for e in events)

    # Everything goes: Pod, source NAD; the shadow stays Terminating behind its finalizer.
    client.CoreV1Api(api).delete_namespaced_pod("workload", ns, grace_period_seconds=0)
    objs = client.CustomObjectsApi(api)
    objs.delete_namespaced_custom_object(*NAD_API[:2], ns, NAD_API[2], "side")
    objs.delete_namespaced_custom_object(*NAD_API[:2], ns, NAD_API[2], "hd")
    objs.delete_namespaced_custom_object(*NAD_API[:2], ns, NAD_API[2], shadow["name"])
    assert as_object(objs.get_namespaced_custom_object(*NAD_API[:2], ns, NAD_API[2], shadow["name"]))[
        "metadata"
    ]["deletionTimestamp"]
    mark = testbed.audit.mark()
    rm = _shim(shim_bin, "DEL", conf, "live1", sandbox, _args(ns, "workload", uid))
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert testbed.audit.events(since=mark, user=CNI_USER) == []
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["command"], c["env"]["CNI_IFNAME"]) for c in calls] == [("ADD", "dra0"), ("DEL", "dra0")]
    assert not (tmp_path / "cache" / "live1").exists()
    assert not any(f.startswith("10.") for d in ("podnet", "side") for f in os.listdir(tmp_path / "ipam" / d))
    # host-device gave the veth back to the host
    assert subprocess.run(["ip", "link", "show", veth], capture_output=True, check=False).returncode == 0
    # release the shadow as the driver would
    objs.patch_namespaced_custom_object(
        *NAD_API[:2], ns, NAD_API[2], shadow["name"], {"metadata": {"finalizers": None}}
    )


def test_pod_not_found_is_an_empty_success_and_uid_mismatch_fails(
    testbed, k8s_namespace, cni_kubeconfig, shim_bin, netns, tmp_path
):
    conf = _conf(tmp_path, cni_kubeconfig, tmp_path / "log")
    sandbox = netns()
    gone = _shim(shim_bin, "ADD", conf, "nf1", sandbox, _args(k8s_namespace, "ghost", "u"))
    assert gone.returncode == 0, gone.stdout
    assert gone.json["ips"] == [{"address": "0.0.0.0/0", "gateway": "0.0.0.0"}]
    assert not (tmp_path / "cache" / "nf1").exists()

    create_pod(testbed.api_client, k8s_namespace, "p2", testbed.node_name, {})
    wrong = _shim(
        shim_bin,
        "ADD",
        conf,
        "nf2",
        sandbox,
        _args(k8s_namespace, "p2", "00000000-0000-0000-0000-000000000000"),
    )
    assert wrong.returncode == 1
    assert json.loads(wrong.stdout)["details"] == "PodUIDMismatch"


def test_missing_nad_and_forbidden_reads_fail_visibly(
    testbed, k8s_namespace, cni_kubeconfig, shim_bin, netns, tmp_path
):
    api = testbed.api_client
    pod = create_pod(api, k8s_namespace, "p3", testbed.node_name, {keys.NETWORKS_ANNOTATION: "absent"})
    conf = _conf(tmp_path, cni_kubeconfig, tmp_path / "log")
    sandbox = netns()
    out = _shim(shim_bin, "ADD", conf, "m1", sandbox, _args(k8s_namespace, "p3", pod["metadata"]["uid"]))
    assert out.returncode == 1
    assert json.loads(out.stdout)["details"] == "NoNetworkFound"
    # an identity without RBAC gets a visible refusal, never a stale fallback
    unbound = testbed.issue_identity("cni-shim-unbound", "cni-shim-unbound")
    unbound_conf = dict(conf, kubeconfig=str(unbound))
    out = _shim(
        shim_bin, "ADD", unbound_conf, "m2", sandbox, _args(k8s_namespace, "p3", pod["metadata"]["uid"])
    )
    assert out.returncode == 1
    assert "403" in json.loads(out.stdout)["msg"]
