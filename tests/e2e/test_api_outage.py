"""The API server goes away and comes back, on the real kubelet v1.36.3 (issue #35 item 4).

- An outage: kube-apiserver stopped (SIGTERM) for a while, then started again on the same etcd.
  Meanwhile the Pod that runs keeps its interfaces, the driver and cni-shim-daemon keep running (no
  crash, no re-registration), the sandbox the kubelet re-creates during the outage fails its ADD
  with the documented reason and succeeds once the API is back; afterwards both agents have
  relisted, the Pod has its interfaces still and a new Pod runs. `make test` runs a 15 s outage,
  `make faults` (-m faults) the issue's two minutes.
- A watch that expires: with both agents stopped (SIGSTOP) across an API server restart and an
  etcd compaction, the daemon resumes its watches from a resourceVersion that no longer exists,
  gets 410 Gone and relists; a NAD changed and a ResourceSlice deleted in the gap are seen.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cni_shim import reasons
from sriov_dra.model import DRIVER_NAME
from testbed.controlplane import start_apiserver, stop_apiserver
from testbed.faultproxy import FaultProxy
from testbed.netlinks import ipv4_addresses, ns_links
from testbed.outage import compact_etcd
from testbed.processes import Process
from testbed.scenario import Running, running_pairs
from testbed.stack import Stack
from testbed.waiting import WaitTimeout, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.netns]

MANAGED = ("dra0", "dra1")
RELIST_TIMEOUT = 60.0


def _addresses(stack: Stack, run: Running) -> dict[str, list[str]]:
    """The managed interfaces' IPv4 addresses, read inside the Pod's network namespace."""
    links = ns_links(stack.kubelet.netns_path(run.pod["metadata"]["uid"]))
    return {name: ipv4_addresses(links.get(name, {})) for name in MANAGED}


def _daemon_lines(stack: Stack) -> list[dict[str, object]]:
    assert stack.cni.daemon is not None
    lines = []
    for raw in stack.cni.daemon.log.read_text(errors="replace").splitlines():
        if raw.startswith("{"):
            lines.append(json.loads(raw))
    return lines


def _relists(stack: Stack, cause: str) -> dict[str, list[int]]:
    """resourceVersions the daemon's informers relisted at, by kind, for `cause`."""
    found: dict[str, list[int]] = {"pod": [], "nad": []}
    for line in _daemon_lines(stack):
        msg = str(line.get("msg", ""))
        if msg.endswith("informer relisted") and line.get("cause") == cause:
            found[msg.split(maxsplit=1)[0]].append(int(str(line["resourceVersion"])))
    return found


def _informer_lines(stack: Stack) -> list[dict[str, object]]:
    return [line for line in _daemon_lines(stack) if "informer" in str(line.get("msg", ""))]


def _processes(stack: Stack) -> tuple[Process, Process]:
    assert stack.host_driver.process is not None and stack.cni.daemon is not None
    return stack.host_driver.process, stack.cni.daemon


def _skip_unless_faults(request: pytest.FixtureRequest, outage_s: float) -> None:
    if outage_s > 60 and "faults" not in (request.config.getoption("markexpr", "") or ""):
        pytest.skip(f"a {outage_s:.0f} s outage runs under `make faults` (-m faults)")


@pytest.mark.parametrize(
    "outage_s", [pytest.param(15.0, id="15s"), pytest.param(120.0, id="2min", marks=pytest.mark.faults)]
)
def test_an_api_server_outage_keeps_running_pods_and_the_agents_relist(
    thick_stack: Stack, request: pytest.FixtureRequest, outage_s: float
) -> None:
    _skip_unless_faults(request, outage_s)
    stack = thick_stack
    node = stack.node_runtime
    driver, daemon = _processes(stack)
    registrations = stack.host_driver.registrations()
    with running_pairs(stack) as run:
        uid = run.pod["metadata"]["uid"]
        before = _addresses(stack, run)
        assert all(len(a) == 1 for a in before.values()), before
        failed_before = _relists(stack, "failed")
        lines_before = len(_daemon_lines(stack))
        old_sandbox = node.ready_sandbox(uid)["id"]
        stop_apiserver(stack.bed)
        down = time.monotonic()
        try:
            # A sandbox dies during the outage: the kubelet re-creates it from its own caches and
            # the ADD cannot read the Pod; it must fail with the documented reason, then retry.
            os.kill(node.sandbox_pid(old_sandbox), signal.SIGKILL)  # the pause process
            while time.monotonic() - down < outage_s:
                assert driver.alive() and daemon.alive(), "a node agent exited during the outage"
                time.sleep(1.0)  # a poll interval, bounded by the outage's length
        finally:
            start_apiserver(stack.bed)
        back = time.monotonic()

        def relisted() -> bool:
            now = _relists(stack, "failed")
            return all(len(now[k]) > len(failed_before[k]) for k in now)

        wait_for(relisted, RELIST_TIMEOUT, what="cni-shim-daemon's informers to relist after the outage")
        stack.cluster.wait_running(run.pod["metadata"]["namespace"], run.pod["metadata"]["name"])

        def ready_again() -> bool:
            ready = [s for s in node.sandboxes(uid) if s.get("state") == "SANDBOX_READY"]
            return bool(ready) and ready[0]["id"] != old_sandbox

        wait_for(ready_again, 180, what="the kubelet to re-create the sandbox once the API is back")
        converged = time.monotonic() - back
        assert _addresses(stack, run) == before, "the Pod's interfaces changed across the outage"
        answers = [str(line["msg"]) for line in _daemon_lines(stack)[lines_before:] if "containerID" in line]
        failed = sorted({a for a in answers if not a.endswith(" ok")})
        # What the kubelet saw in between: reasons of the catalogue (docs/reasons.md), e.g. the ADD
        # that cannot read the Pod, or a DEL whose whereabouts (it keeps leases in the API) failed.
        assert all(a.split()[1] in reasons.MEANINGS for a in failed), answers
        assert "ADD ok" in answers and "DEL ok" in answers, answers
        # The driver's watches relist on their own; a slice deleted now comes back.
        slices = stack.cluster.slices(stack.node_name, DRIVER_NAME)
        stack.cluster.delete_slices(slices[:1])
        stack.driver.wait_advertised(run.workload.advertised)
        assert driver.alive() and daemon.alive()
        assert stack.host_driver.registrations() == registrations, "the driver re-registered"
        print(f"outage {outage_s:.0f}s: {failed}; converged {converged:.1f}s after the API server was back")
    with running_pairs(stack) as fresh:  # a new Pod after the outage, and nothing left after it
        assert all(len(a) == 1 for a in _addresses(stack, fresh).values())


@contextlib.contextmanager
def _daemon_through(stack: Stack, kubeconfig: Path) -> Iterator[None]:
    """cni-shim-daemon restarted to reach the API server through `kubeconfig` for the block."""
    path = stack.run / "daemon-config.json"
    original = path.read_text()
    stack.cni.stop_daemon()
    path.write_text(json.dumps({**json.loads(original), "kubeconfig": str(kubeconfig)}))
    stack.cni.start_daemon()
    try:
        yield
    finally:
        stack.cni.stop_daemon()
        path.write_text(original)
        stack.cni.start_daemon()


def test_a_watch_resumed_after_a_compaction_gets_410_and_the_agents_relist(
    thick_stack: Stack, fault_proxy: Callable[..., FaultProxy]
) -> None:
    """The daemon reaches the API through the fault proxy, which ends its watches cleanly (as a
    load balancer or a polite API server does): it resumes from the last resourceVersion it saw,
    which the restarted API server and the compacted etcd no longer have. The driver watches
    without a resourceVersion (every watch starts with the current state), so it cannot get 410;
    it must still see what changed while it slept."""
    stack = thick_stack
    proxy = fault_proxy(identity="cni")
    with _daemon_through(stack, proxy.kubeconfig), running_pairs(stack) as run:
        driver, daemon = _processes(stack)
        before = _addresses(stack, run)
        wait_for(lambda: len(proxy.requests_for(verb="watch")) >= 2, 30, what="the daemon's two watches")
        expired_before = _relists(stack, "expired")
        source = next(d for d in run.workload.admin if d["kind"] == "NetworkAttachmentDefinition")
        ns, name = source["metadata"]["namespace"], source["metadata"]["name"]
        slices = stack.cluster.slices(stack.node_name, DRIVER_NAME)
        assert slices
        with driver.paused(), daemon.paused():
            assert proxy.end_streams() >= 2
            stop_apiserver(stack.bed)
            start_apiserver(stack.bed)  # its watch cache starts now: older versions get 410
            changed: Any = stack.cluster.objects.patch_namespaced_custom_object(
                "k8s.cni.cncf.io",
                "v1",
                ns,
                "network-attachment-definitions",
                name,
                {"metadata": {"annotations": {"example.com/outage": "changed-in-the-gap"}}},
            )
            stack.cluster.delete_slices(slices[:1])
            compact_etcd(stack.bed)
        version = int(changed["metadata"]["resourceVersion"])

        def relisted() -> bool:
            now = _relists(stack, "expired")
            return all(any(v >= version for v in now[k][len(expired_before[k]) :]) for k in now)

        try:
            wait_for(relisted, RELIST_TIMEOUT, what="cni-shim-daemon to relist after 410 Gone")
        except WaitTimeout:
            pytest.fail(f"no relist at or after {version}: {_informer_lines(stack)}")
        stack.driver.wait_advertised(run.workload.advertised)
        assert driver.alive() and daemon.alive()
        assert _addresses(stack, run) == before
