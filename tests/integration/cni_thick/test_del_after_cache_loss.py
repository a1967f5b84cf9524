"""Thick mode: a DEL after the daemon's delegate cache is lost and the Pod force-deleted runs the
managed shadow's frozen sriov config (issue #35 item 6), through the real shim, daemon and
kube-apiserver, with the daemon's own identity and either API view."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.cluster import NAD_API
from testbed.cni_daemon import shim_conf
from testbed.cni_objects import bind_by_hand, create_pod
from testbed.managed_shadows import rendered_sriov_config
from tests.support.cni_daemon import pod_args, run_shim

pytestmark = [pytest.mark.integration]

PCI = "0000:03:00.1"


def _calls(log: Path) -> list[tuple[str, str, str]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [(c["command"], c["stdin"]["name"], c["env"]["CNI_IFNAME"]) for c in map(json.loads, lines)]


@pytest.mark.parametrize("live", [False, True], ids=["informer-view", "live-view"])
def test_the_daemon_tears_down_the_shadow_after_cache_loss(
    testbed: Any, k8s_namespace: str, cni_daemon: Any, thick_bin: Path, tmp_path: Path, live: bool
) -> None:
    ns, api = k8s_namespace, testbed.api_client
    cache = tmp_path / "cache"
    daemon = cni_daemon({"cniDir": str(cache), "binDir": str(thick_bin), "liveNetworkConfigOnAdd": live})
    log = tmp_path / "calls.jsonl"
    pod = create_pod(api, ns, "workload", testbed.node_name, {})
    shadow, _ = bind_by_hand(
        api, pod, testbed.node_name, rendered_sriov_config(PCI, logFile=str(log)), pci=PCI
    )
    conf = shim_conf(
        daemon, delegates=[{"cniVersion": "1.0.0", "name": "podnet", "type": "recorder", "logFile": str(log)}]
    )
    args = pod_args(ns, "workload", pod["metadata"]["uid"])
    add = run_shim(thick_bin, "ADD", conf, "lost1", args)
    assert add.returncode == 0, add.stdout + add.stderr
    assert _calls(log) == [("ADD", "podnet", "eth0"), ("ADD", "rail-a", "dra0")]

    shutil.rmtree(cache)
    client.CoreV1Api(api).delete_namespaced_pod("workload", ns, grace_period_seconds=0)
    try:
        rm = run_shim(thick_bin, "DEL", conf, "lost1", args)
        assert rm.returncode == 0, rm.stdout + rm.stderr
        assert _calls(log)[2:] == [("DEL", "rail-a", "dra0"), ("DEL", "podnet", "eth0")]
    finally:
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            *NAD_API[:2], ns, NAD_API[2], shadow["name"], {"metadata": {"finalizers": None}}
        )
