"""A live ADD of a Pod with several managed shadows reads them with one LIST by their pod-UID
label, through the real shim, daemon and API server: the ADD attaches exactly what the GETs
would have given, in selection order, and the LIST is a consistent read."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed.apiobjects import as_object, items_of
from testbed.cluster import NAD_API
from testbed.cni_daemon import DAEMON_USER, shim_conf
from testbed.cni_objects import create_nad, create_pod, node_uid
from testbed.managed_shadows import managed_shadow, registry_annotation, rendered_sriov_config
from testbed.waiting import wait_for
from tests.support.cni_daemon import pod_args, run_shim

pytestmark = [pytest.mark.integration]

RAILS = 3


def _calls(log: Path) -> list[tuple[str, str, str]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [(c["command"], c["stdin"]["name"], c["env"]["CNI_IFNAME"]) for c in map(json.loads, lines)]


def _name(nad: dict[str, Any]) -> str:
    return str(nad["metadata"]["name"])


def _bind_rails(api: Any, pod: dict[str, Any], node: str, log: Path) -> tuple[list[dict[str, Any]], str]:
    """The driver's work for RAILS VFs, by hand: a shadow each, then the Pod's selections and registry
    (an ordinary NAD `plain` selected between them). Returns the shadows and the Pod's new resourceVersion."""
    ns, uid = pod["metadata"]["namespace"], pod["metadata"]["uid"]
    shadows = []
    for i in range(RAILS):
        pci = f"0000:3b:{i:02x}.1"
        shadow = managed_shadow(
            namespace=ns,
            pod_name=pod["metadata"]["name"],
            pod_uid=uid,
            node=node,
            config=rendered_sriov_config(pci, name=f"rail-{i}", logFile=str(log)),
            pci=pci,
            interface=f"dra{i}",
            seed=f"{ns}-{i}",
            node_uid=node_uid(api, node),
        )
        shadow["entry"]["uid"] = create_nad(api, ns, shadow["nad"])["metadata"]["uid"]
        shadows.append(shadow)
    selections = [shadows[0]["selection"], {"name": "plain"}, *(s["selection"] for s in shadows[1:])]
    annotations = {
        keys.NETWORKS_ANNOTATION: json.dumps(selections),
        keys.REGISTRY_ANNOTATION: registry_annotation(uid, [s["entry"] for s in shadows]),
    }
    patched = client.CoreV1Api(api).patch_namespaced_pod(
        pod["metadata"]["name"], ns, {"metadata": {"annotations": annotations}}
    )
    assert patched.metadata is not None
    return shadows, str(patched.metadata.resource_version)


def test_a_pod_s_shadows_come_in_one_consistent_list(
    testbed: Any, k8s_namespace: str, cni_daemon: Any, thick_bin: Path, tmp_path: Path
) -> None:
    ns, api = k8s_namespace, testbed.api_client
    log = tmp_path / "calls.jsonl"
    recorder = {"cniVersion": "1.0.0", "type": "recorder", "logFile": str(log)}
    create_nad(
        api,
        ns,
        {"metadata": {"name": "plain"}, "spec": {"config": json.dumps({**recorder, "name": "plain"})}},
    )
    daemon = cni_daemon(
        {"cniDir": str(tmp_path / "cache"), "binDir": str(thick_bin), "liveNetworkConfigOnAdd": True}
    )
    pod = create_pod(api, ns, "workload", testbed.node_name, {})
    shadows, version = _bind_rails(api, pod, testbed.node_name, log)
    key = f"{ns}/workload"
    wait_for(
        lambda: daemon.informers()["pod"].get(key) == version,
        20,
        what=f"the daemon's Pod informer to see {key}'s registry",
    )
    conf = shim_conf(daemon, delegates=[{**recorder, "name": "podnet"}])
    args = pod_args(ns, "workload", pod["metadata"]["uid"])
    custom = client.CustomObjectsApi(api)
    try:
        mark = testbed.audit.mark()
        add = run_shim(thick_bin, "ADD", conf, "rails1", args)
        assert add.returncode == 0, add.stdout + add.stderr
        calls = _calls(log)
        # The last shadows run at once (cni_shim.core.delegatewaves), so only their set is fixed.
        assert calls[:3] == [("ADD", "podnet", "eth0"), ("ADD", "rail-0", "dra0"), ("ADD", "plain", "net2")]
        assert sorted(calls[3:]) == [("ADD", f"rail-{i}", f"dra{i}") for i in range(1, RAILS)]
        testbed.audit.wait_for_count(1, since=mark, user=DAEMON_USER, verb="update")
        reads = testbed.audit.events(since=mark, user=DAEMON_USER)
        nads = [e for e in reads if e.resource == "network-attachment-definitions"]
        assert Counter((e.verb, e.name) for e in nads) == Counter({("list", ""): 1, ("get", "plain"): 1})
        # Live means a consistent read: no resourceVersion (a "0" would be served from the watch cache).
        assert [e.uri for e in nads if "resourceVersion" in e.uri] == []
        # What a LIST answers of a NAD is what its GET answers.
        listed = items_of(
            custom.list_namespaced_custom_object(
                *NAD_API[:2], ns, NAD_API[2], label_selector=f"{keys.POD_UID_LABEL}={pod['metadata']['uid']}"
            )
        )
        got = [
            as_object(custom.get_namespaced_custom_object(*NAD_API[:2], ns, NAD_API[2], s["name"]))
            for s in shadows
        ]
        assert sorted(listed, key=_name) == sorted(got, key=_name)
        # Without a netns: the real static IPAM the shim runs after each managed delegate's DEL
        # refuses this test's netns (the plugin's own); a kubelet's DEL never names that netns.
        rm = run_shim(thick_bin, "DEL", conf, "rails1", args, netns="")
        assert rm.returncode == 0, rm.stdout + rm.stderr
    finally:
        for shadow in shadows:
            custom.patch_namespaced_custom_object(
                *NAD_API[:2], ns, NAD_API[2], shadow["name"], {"metadata": {"finalizers": None}}
            )
