"""Spec 14.3 end to end: two rails through SriovNetworkNodePolicy and SriovNetwork, on a Stack.

The administrator writes only the spec's SriovNetwork and SriovNetworkNodePolicy objects
(docs/examples/operator-two-rails.yaml; the PF names and the whereabouts datastore are the only
substitutions); sriov-operator, under its shipped RBAC, renders the source NADs and generates the
driver's DeviceAttributes / SriovResourcePolicy; `sriov-operator node-state` reports the fake
node's sysfs inventory. The driver runs as the operator overlay installs it, reading its policies
from the operator namespace. Then the 14.2 workload (DeviceClasses, claim template, Pod: no NAD
or rail named) runs with every 14.4 check, plus the operator's own (testbed/operator_checks.py):
the generated objects match 14.3's expected output, the source NADs survive prepare and a forced
resync unchanged, and deleting one policy withdraws its VFs so that a new claim for them fails
visibly.

    with Stack(bed, thick=True) as stack:
        result = run_operator_rails(stack)
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError
from testbed.checks import check_sources_unchanged, teardown_checks
from testbed.cluster import NAD_API
from testbed.deployment import NODE_STATE_SA, OPERATOR_DIR, OPERATOR_NAMESPACE, OPERATOR_SA
from testbed.driver import DRIVER
from testbed.installation import DAEMONSETS
from testbed.operator import GROUP, VERSION, node_state_probe, operator_probe, token_kubeconfig
from testbed.operator_checks import (
    GENERATED_BY,
    NETWORKS,
    POLICIES,
    READY_TIMEOUT,
    check_generated,
    wait_ready,
    withdraw_policy,
)
from testbed.processes import BIN, Process
from testbed.results import FAIL, Check, Result
from testbed.scenario import new_result, source_snapshot, spec_checks, start_pod, stop_pod
from testbed.stack import Stack
from testbed.waiting import WaitTimeout, wait_for
from testbed.workloads import WORKLOAD_NS, Workload, find, load_examples, one_line_pod, pf_renames

EXAMPLE = "operator-two-rails.yaml"
WITHDRAWN_POLICY = "rail-b-policy"
OPERATOR_COMPONENT = "sriov-operator"  # the Deployment's Pod label and its container's name
NOOP_PASSES = ("node-policy pass done: 0 write(s)", "network pass done: 0 write(s)")
DEVICE_CLASS_API = ("resource.k8s.io", "v1", "deviceclasses")
PLURALS = {
    "SriovNetwork": "sriovnetworks",
    "SriovNetworkNodePolicy": "sriovnetworknodepolicies",
    "SriovNetworkNodeState": "sriovnetworknodestates",
    "SriovOperatorConfig": "sriovoperatorconfigs",
}


def operator_docs(stack: Stack) -> list[dict[str, Any]]:
    """Spec 14.3's objects with the allowed substitutions: real PF names, and whereabouts'
    datastore merged into each ipam string (compact: the renderer strips whitespace anyway)."""
    renames = pf_renames(stack.fake_node)
    out = []
    for original in load_examples(EXAMPLE):
        doc = copy.deepcopy(original)
        if doc["kind"] == "SriovNetworkNodePolicy":
            selector = doc["spec"]["nicSelector"]
            selector["pfNames"] = [renames.get(n, n) for n in selector["pfNames"]]
        if doc["kind"] == "SriovNetwork":
            ipam = json.loads(doc["spec"]["ipam"])
            ipam.update(stack.cni.whereabouts_ipam())
            doc["spec"]["ipam"] = json.dumps(ipam, separators=(",", ":"))
        out.append(doc)
    return out


def workload_of(stack: Stack, sources: Sequence[Mapping[str, Any]]) -> Workload:
    """14.2's DeviceClasses, claim template and Pod; the operator-rendered NADs as the sources."""
    pairs = load_examples("multus-auto-gpu-nic-pairs.yaml")
    return Workload(
        "operator-rails",
        admin=tuple(dict(s) for s in sources),
        workload=tuple(d for d in pairs if d["kind"] in ("DeviceClass", "ResourceClaimTemplate")),
        pod=find(pairs, "Pod"),
        advertised=frozenset(vf.pci for vf in stack.fake_node.vfs),
    )


class Operator:
    """sriov-operator and the node-state reporter as the operator overlay runs them, and the
    driver pointed at the operator namespace; undone (driver included) on exit."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.bed = stack.bed
        self.process: Process | None = None
        self.log = stack.run / "sriov-operator.log"

    def __enter__(self) -> Operator:
        try:
            self._up()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _up(self) -> None:
        self._grant()
        self.stack.cluster.apply(
            [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "SriovOperatorConfig",
                    "metadata": {"name": "default", "namespace": OPERATOR_NAMESPACE},
                    "spec": {"featureGates": {"dynamicResourceAllocation": True}},
                }
            ]
        )
        self.stack.say(
            f"Restarting sriov-dra-driver with its policies in {OPERATOR_NAMESPACE} (the operator overlay)..."
        )
        self.stack.driver.restart({"NAMESPACE": OPERATOR_NAMESPACE})
        self.stack.say(
            "Reporting the node's SR-IOV inventory (sriov-operator node-state, from the fake sysfs)..."
        )
        self._report_node_state()
        self.start()

    def _grant(self) -> None:
        """The operator namespace, the driver's policy RBAC there, and a token of each identity."""
        self.bed.create_namespace(OPERATOR_NAMESPACE, exist_ok=True)
        self.bed.apply(yaml.safe_load_all((OPERATOR_DIR / "driver-policy-rbac.yaml").read_text()))
        ns = OPERATOR_NAMESPACE
        self.kubeconfig = token_kubeconfig(
            self.bed,
            ns,
            OPERATOR_SA,
            "rbac.yaml",
            operator_probe(ns),
            self.stack.run / "operator-kubeconfig.json",
        )
        self.reporter = token_kubeconfig(
            self.bed,
            ns,
            NODE_STATE_SA,
            "node-state.yaml",
            node_state_probe(ns),
            self.stack.run / "node-state-kubeconfig.json",
        )

    def _report_node_state(self) -> None:
        out = subprocess.run(
            [
                str(BIN / "sriov-operator"),
                "--namespace",
                OPERATOR_NAMESPACE,
                "--kubeconfig",
                str(self.reporter),
                "node-state",
                "--once",
                "--node-name",
                self.bed.node_name,
                "--sysfs-root",
                str(self.stack.fake_node.sysfs_root),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if out.returncode != 0:
            raise ReasonedError(
                "NodeStateNotReported", f"sriov-operator node-state failed: {out.stderr[-2000:]}"
            )

    def start(self) -> None:
        self.stack.say("Starting sriov-operator (network and node-policy controllers, shipped RBAC)...")
        self.process = Process(
            [
                str(BIN / "sriov-operator"),
                "--namespace",
                OPERATOR_NAMESPACE,
                "--kubeconfig",
                str(self.kubeconfig),
                # Long: every reaction in this scenario must come from a watch event.
                "--resync-seconds",
                "3600",
            ],
            dict(os.environ),
            self.log,
        )

    def resync(self) -> None:
        """A forced full resync: a fresh process makes one pass of each controller."""
        assert self.process is not None
        before = [self.process.output(10_000_000).count(p) for p in NOOP_PASSES]
        self.process.stop()
        self.start()
        process = self.process
        assert process is not None
        wait_for(
            lambda: all(
                process.output(10_000_000).count(p) > n for p, n in zip(NOOP_PASSES, before, strict=True)
            ),
            READY_TIMEOUT,
            what="both controllers to finish a no-op pass after the restart",
        )

    def output(self) -> str:
        return self.process.output() if self.process is not None else ""

    def __exit__(self, *exc: object) -> None:
        """Remove what the scenario made, the operator deleting what it generated; then the driver
        goes back to the base installation's policy namespace."""
        with contextlib.ExitStack() as steps:
            steps.callback(self.stack.driver.restart)
            steps.callback(self._delete_leftovers)
            steps.callback(self._stop)
            for doc in reversed(operator_docs(self.stack)):
                with contextlib.suppress(ApiException):
                    self.stack.cluster.objects.delete_namespaced_custom_object(
                        GROUP, VERSION, OPERATOR_NAMESPACE, PLURALS[doc["kind"]], doc["metadata"]["name"]
                    )
            if self.running():
                with contextlib.suppress(WaitTimeout):
                    wait_for(lambda: not self._generated_left(), 30, what="generated objects removed")

    def running(self) -> bool:
        return self.process is not None and self.process.alive()

    def _stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def _generated_left(self) -> list[str]:
        left = [
            f"{plural}/{o['metadata']['name']}"
            for plural in ("deviceattributes", "sriovresourcepolicies")
            for o in self.stack.cluster.list_objects(DRIVER, "v1alpha1", plural, namespace=OPERATOR_NAMESPACE)
        ]
        left += [f"deviceclasses/{name}" for name in self._generated_classes()]
        left += [
            f"NetworkAttachmentDefinition {WORKLOAD_NS}/{name}"
            for name in NETWORKS
            if _exists(lambda n=name: self.stack.cluster.nad(WORKLOAD_NS, n))
        ]
        return left

    def _generated_classes(self) -> list[str]:
        labelled = self.stack.cluster.list_objects(
            *DEVICE_CLASS_API, label_selector=f"{GENERATED_BY}=sriov-network-operator"
        )
        return [str(o["metadata"]["name"]) for o in labelled]

    def _delete_leftovers(self) -> None:
        """What a failed run may leave: generated objects, node states, the operator config."""
        for name in self._generated_classes():
            with contextlib.suppress(ApiException):
                self.stack.cluster.objects.delete_cluster_custom_object(*DEVICE_CLASS_API, name)
        for plural in ("deviceattributes", "sriovresourcepolicies"):
            for o in self.stack.cluster.list_objects(
                DRIVER, "v1alpha1", plural, namespace=OPERATOR_NAMESPACE
            ):
                with contextlib.suppress(ApiException):
                    self.stack.cluster.objects.delete_namespaced_custom_object(
                        DRIVER, "v1alpha1", OPERATOR_NAMESPACE, plural, o["metadata"]["name"]
                    )
        for plural in (PLURALS["SriovNetworkNodeState"], PLURALS["SriovOperatorConfig"]):
            for o in self.stack.cluster.list_objects(GROUP, VERSION, plural, namespace=OPERATOR_NAMESPACE):
                with contextlib.suppress(ApiException):
                    self.stack.cluster.objects.delete_namespaced_custom_object(
                        GROUP, VERSION, OPERATOR_NAMESPACE, plural, o["metadata"]["name"]
                    )
        for name in NETWORKS:
            with contextlib.suppress(ApiException):
                self.stack.cluster.objects.delete_namespaced_custom_object(
                    *NAD_API[:2], WORKLOAD_NS, NAD_API[2], name
                )


class InstalledOperator(Operator):
    """sriov-operator as its Deployment and the reporter as its DaemonSet, from deploy/operator/
    applied by kubectl beside the installed base (``Installation.operator_docs``; on the bed the
    operator's Pod uses the host network, see ``site_patches``). The namespace stays, as the
    host-process variant leaves it."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(stack)
        assert stack.installation is not None, "an installed stack"
        self.installation = stack.installation
        self.docs: list[dict[str, Any]] = []

    def _grant(self) -> None:
        self.docs = self.installation.operator_docs()
        self.stack.say(
            f"Applying deploy/operator/'s operator Deployment, node-state DaemonSet and RBAC ({len(self.docs)} objects)..."
        )
        self.installation.apply(self.docs)

    def _report_node_state(self) -> None:
        for node in self.stack.nodes:
            wait_for(
                functools.partial(self._reported, node.node_name),
                READY_TIMEOUT,
                what=f"the sriov-node-state DaemonSet to report {node.node_name}",
                interval=0.5,
            )

    def _reported(self, node: str) -> bool:
        try:
            state = self.stack.cluster.get_object(
                GROUP, VERSION, PLURALS["SriovNetworkNodeState"], node, namespace=OPERATOR_NAMESPACE
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return bool((state.get("status") or {}).get("interfaces"))

    def start(self) -> None:
        self.stack.say("Waiting for the sriov-operator Deployment's Pod (kubelet)...")
        self._wait_serving(None, ("node-policy pass done", "network pass done"))

    def resync(self) -> None:
        """A forced full resync: the Deployment replaces a deleted Pod, whose first passes are
        full ones (and write nothing)."""
        pod = self._pod()
        assert pod is not None
        self.stack.cluster.core.delete_namespaced_pod(pod["metadata"]["name"], OPERATOR_NAMESPACE)
        self._wait_serving(pod["metadata"]["uid"], NOOP_PASSES)

    def _wait_serving(self, replaced: str | None, passes: Sequence[str]) -> None:
        def serving() -> bool:
            pod = self._pod()
            if pod is None or pod["metadata"]["uid"] == replaced:
                return False
            log = self._log(pod)
            return all(p in log for p in passes)

        wait_for(serving, READY_TIMEOUT, what=f"a sriov-operator Pod to log {list(passes)}", interval=0.5)

    def _pod(self) -> dict[str, Any] | None:
        listed = self.stack.cluster.core.list_namespaced_pod(
            OPERATOR_NAMESPACE, label_selector=f"app.kubernetes.io/component={OPERATOR_COMPONENT}"
        )
        pods = [
            p
            for p in self.stack.cluster.api.sanitize_for_serialization(listed)["items"]
            if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        return pods[0] if pods else None

    def _log(self, pod: Mapping[str, Any]) -> str:
        node = self.stack.on(pod["spec"]["nodeName"]).node_runtime
        return node.container_log(pod["metadata"]["uid"], OPERATOR_COMPONENT)

    def output(self) -> str:
        pod = self._pod()
        return self._log(pod) if pod is not None else "no sriov-operator Pod is running"

    def running(self) -> bool:
        return self._pod() is not None

    def _stop(self) -> None:
        self.installation.delete(d for d in self.docs if d["kind"] != "Namespace")


def _exists(get: Any) -> bool:
    try:
        get()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


# -- the scenario ---------------------------------------------------------------------------------


def run_operator_rails(stack: Stack) -> Result:
    result = new_result(stack, "operator-rails")
    started = time.monotonic()
    # The operator overlay as kubectl applies it; the chart's operator toggle is not exercised here.
    with (InstalledOperator if stack.install == DAEMONSETS else Operator)(stack) as operator:
        try:
            _run(stack, operator, result)
        except ReasonedError as exc:
            result.checks.append(Check("the spec 14.3 scenario runs", FAIL, f"{exc.reason}: {exc.message}"))
        if not result.ok:
            stack.say(f"--- sriov-operator ---\n{operator.output()}")
    result.timings["operator_rails_s"] = round(time.monotonic() - started, 2)
    return result


def _run(stack: Stack, operator: Operator, result: Result) -> None:
    docs = operator_docs(stack)
    stack.say("Applying the spec 14.3 SriovNetworks and SriovNetworkNodePolicies...")
    stack.cluster.apply(docs)
    stack.label_nodes(True)
    try:
        result.checks.append(wait_ready(stack))
        policies = {
            p: stack.cluster.get_object(
                GROUP, VERSION, "sriovnetworknodepolicies", p, namespace=OPERATOR_NAMESPACE
            )
            for p in POLICIES
        }
        result.checks.append(check_generated(stack, policies))
        sources = [stack.cluster.nad(WORKLOAD_NS, n) for n in NETWORKS]
        workload = workload_of(stack, sources)
        stack.say(
            "Creating the spec 14.2 workload (DeviceClasses, claim template, Pod) on the operator's mapping..."
        )
        with _workload(stack, workload) as snapshot:
            run = start_pod(stack, workload, workload.pod, snapshot)
            result.timings["pod_running_s"] = run.started_s
            try:
                obs = run.observe()
                result.rows = obs.rows
                result.checks += spec_checks(stack, run, obs, gpus=2, vfs=2)
                stack.say("Forcing an operator resync while the Pod runs...")
                operator.resync()
                after = source_snapshot(stack, workload)
                unchanged = check_sources_unchanged(snapshot, after)
                result.checks.append(
                    Check(
                        "the operator-rendered source NADs are unchanged across prepare and a forced operator resync",
                        unchanged.status,
                        unchanged.detail,
                    )
                )
            finally:
                refs = stop_pod(stack, workload.pod)
            result.after_teardown = teardown_checks(stack, workload, refs)
            stack.say(f"Deleting {WITHDRAWN_POLICY}...")
            result.after_teardown += list(withdraw_policy(stack, WITHDRAWN_POLICY))
    finally:
        stack.gpus.withdraw()
        stack.label_nodes(False)


# The operator's DeviceClass for the example's resourceName sriov_vfs (default prefix openshift.io).
ONE_LINE_RESOURCE = "openshift.io/sriov_vfs"


def run_operator_one_line(stack: Stack) -> Result:
    """The one-line request on the operator path: a Pod whose only request is
    `openshift.io/sriov_vfs: 2` against the DeviceClass the operator generates for that
    resourceName; each VF gets its rail's operator-rendered network."""
    result = new_result(stack, "operator-one-line")
    with (InstalledOperator if stack.install == DAEMONSETS else Operator)(stack) as operator:
        try:
            _run_one_line(stack, result)
        except ReasonedError as exc:
            result.checks.append(Check("the one-line scenario runs", FAIL, f"{exc.reason}: {exc.message}"))
        if not result.ok:
            stack.say(f"--- sriov-operator ---\n{operator.output()}")
    return result


def _run_one_line(stack: Stack, result: Result) -> None:
    stack.cluster.apply(operator_docs(stack))
    stack.label_nodes(True)
    try:
        result.checks.append(wait_ready(stack))
        wait_for(
            lambda: any(
                (c.get("spec") or {}).get("extendedResourceName") == ONE_LINE_RESOURCE
                for c in stack.cluster.list_objects(*DEVICE_CLASS_API)
            ),
            30,
            what=f"the operator's DeviceClass for {ONE_LINE_RESOURCE}",
        )
        workload = Workload(
            "operator-one-line",
            admin=tuple(stack.cluster.nad(WORKLOAD_NS, n) for n in NETWORKS),
            workload=(),
            pod=one_line_pod(ONE_LINE_RESOURCE, 2, "operator-one-line"),
            advertised=frozenset(vf.pci for vf in stack.fake_node.vfs),
        )
        stack.driver.wait_advertised(workload.advertised)
        stack.say(
            f"Creating Pod {WORKLOAD_NS}/operator-one-line with resources.limits {ONE_LINE_RESOURCE}: 2..."
        )
        run = start_pod(stack, workload, workload.pod, source_snapshot(stack, workload))
        try:
            obs = run.observe()
            result.rows = obs.rows
            result.checks += spec_checks(stack, run, obs, gpus=0, vfs=2)
        finally:
            refs = stop_pod(stack, workload.pod)
        result.after_teardown = teardown_checks(stack, workload, refs)
    finally:
        stack.label_nodes(False)


@contextlib.contextmanager
def _workload(stack: Stack, workload: Workload) -> Iterator[dict[str, tuple[str, str, str]]]:
    stack.cluster.apply(list(workload.workload))
    try:
        stack.gpus.publish()
        stack.driver.wait_advertised(workload.advertised)
        yield source_snapshot(stack, workload)
    finally:
        stack.cluster.delete(list(workload.workload))
