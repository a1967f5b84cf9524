"""A node reboots under its Pods, on two real nodes (issue #35 item 2; testbed/reboot.py): every
process, sandbox, network namespace, veth and /run file of the node is gone, its VFs are back on
the host in their reset state, then containerd, the kubelet, the driver and cni-shim-daemon start
again on what stayed on disk. A Deployment's Pods come back Running with exactly their managed
interfaces, in new sandboxes; a Pod deleted while its node was down goes once the node is back;
and after the last reboot nothing is left on either node: no shadow, finalizer, checkpoint record,
CDI spec, orphan, whereabouts or host-local lease, cache file, netns or veth."""

from __future__ import annotations

import copy
import json
import subprocess
import time
from typing import Any

import pytest
from kubernetes import client

from testbed import reboot
from testbed.netlinks import ipv4_addresses
from testbed.observation import observe
from testbed.results import PASS, render_checks
from testbed.scenario import applied, stop_pod
from testbed.soak import end_checks, interface_problems
from testbed.stack import Stack
from testbed.waiting import wait_for
from testbed.workloads import Workload, rails_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]

REPLICAS = 4  # two Pods on each node (spread by the scheduler's default topology spreading)
HOSTNAME_LABEL = "kubernetes.io/hostname"
BACK_TIMEOUT = 180.0


def _deployment(stack: Stack, workload: Workload) -> dict[str, Any]:
    labels = {"app": "reboot-test"}
    template = {"metadata": {"labels": labels}, "spec": stack.kubelet.runnable(workload.pod)["spec"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "reboot-test", "namespace": workload.namespace},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": labels}, "template": template},
    }


def _pods(stack: Stack, namespace: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = stack.cluster.api.sanitize_for_serialization(
        stack.cluster.core.list_namespaced_pod(namespace, label_selector="app=reboot-test")
    )["items"]
    return out


def _sandboxes(stack: Stack, pods: list[dict[str, Any]], node: str | None = None) -> dict[str, str]:
    """Pod UID -> its ready sandbox's ID, of the Pods on ``node`` (or on any)."""
    return {
        p["metadata"]["uid"]: stack.on(p["spec"]["nodeName"]).node_runtime.ready_sandbox(
            p["metadata"]["uid"]
        )["id"]
        for p in pods
        if node in (None, p["spec"]["nodeName"])
    }


def _running_again(stack: Stack, namespace: str, before: dict[str, str]) -> list[dict[str, Any]]:
    """Every Pod of the Deployment Ready, none in one of ``before``'s sandboxes (those of the
    rebooted node's Pods: each restarts in a new one)."""

    def back() -> list[dict[str, Any]] | None:
        pods = [p for p in _pods(stack, namespace) if not p["metadata"].get("deletionTimestamp")]
        ready = [
            p
            for p in pods
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        ]
        if len(ready) != REPLICAS:
            return None
        try:
            now = _sandboxes(stack, ready)
        except Exception:  # a sandbox not listed yet: look again
            return None
        return ready if not set(now.values()) & set(before.values()) else None

    return wait_for(back, BACK_TIMEOUT, what="the Deployment's Pods Running in new sandboxes", interval=0.5)


def _after_power_loss(node: Stack) -> list[str]:
    """What a power loss should have ended but did not."""
    runtime = node.node_runtime
    left = [f"{n} runs" for n, r in (("kubelet", runtime.kubelet), ("containerd", runtime.containerd)) if r]
    left += [
        f"{n} runs"
        for n, p in (("driver", node.host_driver.process), ("daemon", node.cni.daemon))
        if p and p.alive()
    ]
    left += node.kubelet.leftover_netns()
    left += [
        f"{d} not empty" for d in (node.cni.socket_dir, runtime.cdi_dir) if d.is_dir() and any(d.iterdir())
    ]
    for vf in node.fake_node.vfs:
        out = subprocess.run(["ip", "-j", "addr", "show", "dev", vf.netdev], capture_output=True, text=True)
        link = (json.loads(out.stdout) or [None])[0] if out.returncode == 0 else None
        if link is None or "UP" in link["flags"] or ipv4_addresses(link):
            left.append(f"VF {vf.netdev} not on the host in its reset state: {link}")
    return left


def test_pods_come_back_after_node_reboots_and_nothing_is_left(two_node_stack: Stack) -> None:
    stack = two_node_stack
    workload = rails_workload(stack, "reboot")
    namespace = workload.namespace
    refs: list[str] = []
    apps = client.AppsV1Api(stack.cluster.api)
    with applied(stack, workload):
        stack.bed.apply([_deployment(stack, workload)])
        try:
            pods = _running_again(stack, namespace, {})
            for rounds, node in enumerate([stack.nodes[0], stack.nodes[1], stack.nodes[0]]):
                # A Pod of the node deleted while the node is down: it goes once the node is back.
                bare = copy.deepcopy(workload.pod)
                name = bare["metadata"]["name"] = f"reboot-bare-{rounds}"
                bare["spec"]["nodeSelector"] = {
                    **bare["spec"]["nodeSelector"],
                    HOSTNAME_LABEL: node.node_name,
                }
                stack.cluster.create_pod(bare)
                live = stack.cluster.wait_running(namespace, name)
                node.kubelet.netns_path(live["metadata"]["uid"])  # the end checks look for its sandbox
                refs += [f"{namespace}/{name}", *(f"{namespace}/{p['metadata']['name']}" for p in pods)]
                before = _sandboxes(stack, pods, node.node_name)
                assert before, f"no Pod of the Deployment runs on {node.node_name}"
                started = time.monotonic()
                reboot.power_off(node)
                assert _after_power_loss(node) == [], node.node_name
                stack.cluster.core.delete_namespaced_pod(name, namespace)
                reboot.boot(node)
                pods = _running_again(stack, namespace, before)
                print(  # the fault table's row (docs/testing.md)
                    f"reboot {rounds + 1} of {node.node_name}: {len(before)} Pods of the Deployment and 1 deleted "
                    f"meanwhile, all back Running after {time.monotonic() - started:.1f}s"
                )
                for pod in pods:
                    problems = interface_problems(stack.on(pod["spec"]["nodeName"]), observe(stack, pod))
                    assert problems == [], (pod["metadata"]["name"], problems)
                stop_pod(stack, bare)
        finally:
            apps.delete_namespaced_deployment("reboot-test", namespace)
            wait_for(lambda: not _pods(stack, namespace), BACK_TIMEOUT, what="the Deployment's Pods gone")
        checks = end_checks(stack, workload, refs)
        assert all(c.status == PASS for c in checks), render_checks(checks)
