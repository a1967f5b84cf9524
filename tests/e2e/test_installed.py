"""The product installed the way a cluster installs it (testbed/installation.py): our own images,
imported into the node's containerd, and ``deploy/base/`` applied by kubectl or the chart
installed by helm; the real kubelet runs the driver and the CNI DaemonSets as Pods with their own
projected tokens and hostPath volumes. Only the SR-IOV hardware is simulated (the fake node's
tree, which the node's own mount namespace shows where the DaemonSet mounts it).

Skipped, with the reason, where the real kubelet cannot run or the images cannot be built.
"""

from __future__ import annotations

import json
import signal

import pytest

from testbed.deployment import DRIVER_NAMESPACE
from testbed.driver import DRIVER
from testbed.installation import CHART_DIR, DAEMONSETS, HELM_CHART, RELEASE, InstallError
from testbed.installed import InstalledDriver
from testbed.realnode import KUBELET_ROOT
from testbed.results import PASS, render_checks
from testbed.scenario import run_pairs, running_pairs
from testbed.stack import Stack
from testbed.waiting import wait_for
from tests.support.demo import run_demo

pytestmark = [pytest.mark.integration, pytest.mark.netns]


@pytest.mark.parametrize("install", [DAEMONSETS, HELM_CHART])
def test_make_demo_runs_the_installed_product(installable, install: str) -> None:
    """`make demo` as a newcomer runs it (and with --install helm): both scenarios (14.2 and 14.3)
    through the DaemonSets from deploy/base/ (from the chart), every check PASS, nothing left after
    the stack stopped."""
    report = run_demo() if install == DAEMONSETS else run_demo("--install", install)
    rails = report["operator_rails"]
    for scenario in (report, rails):
        checks = [*scenario["checks"], *scenario["after_teardown"], *scenario.get("after_stop", [])]
        assert scenario["install"] == install and scenario["cni_mode"] == "thick", json.dumps(report)[:4000]
        assert [c for c in checks if c["status"] != PASS] == [], json.dumps(checks, indent=2)
    assert {r["interface"] for r in report["rows"]} == {"dra0", "dra1"}


def test_the_kubelet_restarts_a_wedged_driver_and_daemon_and_they_serve_again(stacks, installable) -> None:
    """Probes that tell the truth: SIGSTOP freezes the driver's and the daemon's process (alive to
    the kernel, serving nothing); their liveness probes fail and the kubelet restarts both, the
    driver registers again and the daemon accepts again; the Pods that were healthy before had
    never been restarted."""
    stack: Stack = stacks.get(thick=True, install=HELM_CHART)
    driver, daemon = stack.driver, stack.cni.installed
    assert isinstance(driver, InstalledDriver) and daemon is not None
    assert (driver.pod.restarts(), daemon.pod.restarts()) == (0, 0), (
        f"{driver.pod.describe()}\n{daemon.pod.describe()}"
    )
    registrations = driver.registrations()
    for pod in (driver.pod, daemon.pod):
        pod.signal(signal.SIGSTOP)
    wait_for(
        lambda: driver.pod.restarts() >= 1 and daemon.pod.restarts() >= 1,
        300,
        what="the kubelet to restart the wedged driver and daemon",
        interval=2,
    )
    driver.wait_registered(registrations)
    stack.cni.start_daemon()
    assert (driver.pod.restarts(), daemon.pod.restarts()) == (1, 1)


def test_helm_install_upgrade_rollback_uninstall(stacks, installable) -> None:
    """The chart as a release: installed, its Pods serve the 14.2 workload; an upgrade rolls the
    CNI DaemonSet and the workload still runs; a rollback returns to the first revision; an
    uninstall while a managed Pod runs is refused by the pre-delete check, and once the Pod is gone
    it removes everything."""
    stack: Stack = stacks.get(thick=True, install=HELM_CHART)
    installation = stack.installation
    assert installation is not None
    result = run_pairs(stack)
    assert result.ok, render_checks([*result.checks, *result.after_teardown]) + stack.logs()

    installation.helm(
        "upgrade", RELEASE, str(CHART_DIR), "--reuse-values", "--set", "cni.logLevel=debug", "--wait"
    )
    installation.wait_ready(stack.node_name)
    stack.cni.start_daemon()
    after_upgrade = run_pairs(stack)
    assert after_upgrade.ok, render_checks([*after_upgrade.checks, *after_upgrade.after_teardown])

    installation.helm("rollback", RELEASE, "1", "--wait")
    installation.wait_ready(stack.node_name)
    stack.cni.start_daemon()
    history = json.loads(installation.helm("history", RELEASE, "-o", "json"))
    assert [(h["revision"], h["status"]) for h in history][-1] == (3, "deployed"), history
    config = json.loads(installation.helm("get", "values", RELEASE, "-o", "json"))
    assert "logLevel" not in (config.get("cni") or {}), config

    with running_pairs(stack):
        with pytest.raises(InstallError) as refused:
            installation.helm("uninstall", RELEASE, "--wait", "--timeout", "120s")
        assert "sriov-dra-uninstall-check" in refused.value.message, refused.value.message
        # refused for the managed Pod, by the check itself (not a Job that could not run)
        listed = installation.core.list_namespaced_pod(
            DRIVER_NAMESPACE, label_selector="job-name=sriov-dra-uninstall-check"
        )
        (job_pod,) = installation.api.sanitize_for_serialization(listed)["items"]
        # From the node's own log files: the bed's Node names no address the API server can dial.
        check = stack.node_runtime.container_log(job_pod["metadata"]["uid"], "check")
        assert "UninstallBlocked" in check, check
        # Helm marks the release uninstalling, but nothing of it was deleted: its Pods still serve
        status = json.loads(installation.helm("status", RELEASE, "-o", "json"))["info"]["status"]
        assert status == "uninstalling", status
        assert len(installation.leftovers()) == len(installation.removable())
        installation.wait_ready(stack.node_name)

    # docs/deploying.md's uninstall, as written: verify the node's checkpoint and remove the node
    # files while the DaemonSets run (kubectl debug node), remove the release, then the driver's
    # plugin directory; nothing is left, on the API server or on the node.
    node, log = stack.node_name, stack.node_runtime.container_log
    image = {i.name: i.reference for i in stack.images}
    plugin_dir = f"/host{KUBELET_ROOT}/plugins/{DRIVER}"
    verify = ["sriov-dra", "uninstall-check", "--node-only", "--checkpoint", f"{plugin_dir}/checkpoint.json"]
    installation.debug_node(node, image["sriov-dra-driver"], verify, log)
    removed = installation.debug_node(node, image["cni-shim"], ["/opt/auto-sriov/remove-host-shim"], log)
    assert "removed the shim" in removed, removed
    installation.uninstall()
    installation.debug_node(node, image["sriov-dra-driver"], ["rm", "-rf", plugin_dir], log)
    left = installation.leftovers()
    assert left == [], left
    on_node = [
        *stack.cni.net_dir.glob("*auto-sriov*"),
        *stack.cni.bin_dir.glob("cni-shim*"),
        *stack.cni.bin_dir.glob("auto-sriov-*"),
        *stack.cni.socket_dir.iterdir(),
        *stack.driver.checkpoint.parent.glob("*"),
        *([stack.driver.checkpoint.parent] if stack.driver.checkpoint.parent.exists() else []),
    ]
    assert on_node == [], on_node
