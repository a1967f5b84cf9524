"""Spec 14.3 end to end: two rails through SriovNetworkNodePolicy and SriovNetwork, on a Stack.

The administrator writes only the spec's SriovNetwork and SriovNetworkNodePolicy objects
(docs/examples/operator-two-rails.yaml; the PF names and the whereabouts datastore are the only
substitutions); sriov-operator, under its shipped RBAC, renders the source NADs and generates the
driver's DeviceAttributes / SriovResourcePolicy; `sriov-operator node-state` reports the fake
node's sysfs inventory. The driver runs as the operator overlay installs it, reading its policies
from the operator namespace. Then the 14.2 workload (DeviceClasses, claim template, Pod: no NAD
or rail named) runs with every 14.4 check, plus the operator's own: the generated objects match
14.3's expected output, the source NADs survive prepare and a forced resync unchanged, and
deleting one policy withdraws its VFs so that a new claim for them fails visibly.

    with Stack(bed, thick=True) as stack:
        result = run_operator_rails(stack)
"""

from __future__ import annotations

import contextlib
import copy
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
from testbed.operator import GROUP, VERSION, node_state_probe, operator_probe, token_kubeconfig
from testbed.processes import BIN, Process
from testbed.results import FAIL, Check, Result, check
from testbed.scenario import source_snapshot, spec_checks, start_pod, stop_pod
from testbed.stack import Stack
from testbed.waiting import WaitTimeout, wait_for
from testbed.workloads import WORKLOAD_NS, Workload, find, load_examples, pf_renames

EXAMPLE = "operator-two-rails.yaml"
NETWORKS = ("rail-a-net", "rail-b-net")
POLICIES = ("rail-a-policy", "rail-b-policy")
WITHDRAWN_POLICY = "rail-b-policy"
DRA_READY = "DRAConfigurationReady"
GENERATED_BY = "sriovnetwork.openshift.io/generated-by"
UID_LABEL = "sriovnetwork.openshift.io/node-policy-uid"
POOL_LABEL = "sriovnetwork.openshift.io/resource-pool"
REFERENCE_KEYS = (
    "sriovnetwork.openshift.io/sriovNetworkName",
    "sriovnetwork.openshift.io/sriovNetworkNamespace",
)
NAD_NAME_KEY = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName"
NAD_NS_KEY = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace"
RESOURCE_NAME_KEY = "k8s.cni.cncf.io/resourceName"
PF_NAME_ATTRIBUTE = "sriovnetwork.k8snetworkplumbingwg.io/PFName"
READY_TIMEOUT = 60.0
NOOP_PASSES = ("node-policy pass done: 0 write(s)", "network pass done: 0 write(s)")
PROBE_POD = "rail-b-after-withdrawal"
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
        say = self.stack.say
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
        reporter = token_kubeconfig(
            self.bed,
            ns,
            NODE_STATE_SA,
            "node-state.yaml",
            node_state_probe(ns),
            self.stack.run / "node-state-kubeconfig.json",
        )
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
        say(
            f"Restarting sriov-dra-driver with its policies in {OPERATOR_NAMESPACE} (the operator overlay)..."
        )
        self.stack.driver.restart({"NAMESPACE": OPERATOR_NAMESPACE})
        say("Reporting the node's SR-IOV inventory (sriov-operator node-state, from the fake sysfs)...")
        out = subprocess.run(
            [
                str(BIN / "sriov-operator"),
                "--namespace",
                OPERATOR_NAMESPACE,
                "--kubeconfig",
                str(reporter),
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
        self.start()

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
            if self.process is not None and self.process.alive():
                with contextlib.suppress(WaitTimeout):
                    wait_for(lambda: not self._generated_left(), 30, what="generated objects removed")

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


def _exists(get: Any) -> bool:
    try:
        get()
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


# -- checks -------------------------------------------------------------------------------------


def _condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return next((dict(c) for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def _current(obj: Mapping[str, Any], kind: str) -> bool:
    cond = _condition(obj, kind)
    return cond.get("status") == "True" and cond.get("observedGeneration") == obj["metadata"]["generation"]


def wait_ready(stack: Stack) -> Check:
    def objects() -> list[tuple[str, dict[str, Any]]]:
        nets = [
            (
                "Ready",
                stack.cluster.get_object(GROUP, VERSION, "sriovnetworks", n, namespace=OPERATOR_NAMESPACE),
            )
            for n in NETWORKS
        ]
        pols = [
            (
                DRA_READY,
                stack.cluster.get_object(
                    GROUP, VERSION, "sriovnetworknodepolicies", p, namespace=OPERATOR_NAMESPACE
                ),
            )
            for p in POLICIES
        ]
        return nets + pols

    with contextlib.suppress(WaitTimeout):
        wait_for(
            lambda: all(_current(o, k) for k, o in objects()),
            READY_TIMEOUT,
            what="Ready conditions",
            interval=0.25,
        )
    found = objects()
    detail = ", ".join(
        f"{o['metadata']['name']} {k}={_condition(o, k).get('status', '?')}/{_condition(o, k).get('reason', '?')}"
        for k, o in found
    )
    return check(
        "both SriovNetworks Ready=True and both policies DRAConfigurationReady=True, for their current generation",
        all(_current(o, k) for k, o in found),
        detail,
    )


def check_generated(stack: Stack, policies: Mapping[str, Mapping[str, Any]]) -> Check:
    """Spec 14.3's expected operator output, per policy; and the node's configs select exactly it."""
    attrs = {
        o["metadata"]["name"]: o
        for o in stack.cluster.list_objects(
            DRIVER, "v1alpha1", "deviceattributes", namespace=OPERATOR_NAMESPACE
        )
    }
    problems = []
    for policy_name, policy in policies.items():
        uid = policy["metadata"]["uid"]
        network = policy_name.replace("-policy", "-net")
        obj = attrs.get(f"dra-policy-{uid}-attrs")
        if obj is None:
            problems.append(f"{policy_name}: no dra-policy-{uid}-attrs")
            continue
        want = {
            RESOURCE_NAME_KEY: {"string": "openshift.io/sriov_vfs"},
            NAD_NAME_KEY: {"string": network},
            NAD_NS_KEY: {"string": WORKLOAD_NS},
        }
        if obj["spec"]["attributes"] != want:
            problems.append(f"{policy_name}: attributes {obj['spec']['attributes']}")
        labels = obj["metadata"].get("labels") or {}
        if labels != {GENERATED_BY: "sriov-network-operator", UID_LABEL: uid}:
            problems.append(f"{policy_name}: labels {labels}")
    leaked = [k for o in attrs.values() for k in o["spec"]["attributes"] if k in REFERENCE_KEYS]
    pooled = [n for n, o in attrs.items() if POOL_LABEL in (o["metadata"].get("labels") or {})]
    problems += [f"reference key {k} published" for k in leaked] + [
        f"{n} carries the resource-pool label" for n in pooled
    ]
    node_policy = stack.cluster.get_object(
        DRIVER, "v1alpha1", "sriovresourcepolicies", stack.bed.node_name, namespace=OPERATOR_NAMESPACE
    )
    selected = [
        c["deviceAttributesSelector"]["matchLabels"].get(UID_LABEL) for c in node_policy["spec"]["configs"]
    ]
    if sorted(selected) != sorted(p["metadata"]["uid"] for p in policies.values()):
        problems.append(f"node configs select {selected}")
    return check(
        "the generated objects match spec 14.3: one dra-policy-<UID>-attrs per policy with its own NAD pair "
        "(no sriovNetwork* keys, no resource-pool label), each selected by its policy UID",
        not problems,
        "; ".join(problems) or ", ".join(sorted(attrs)),
    )


def withdraw_policy(stack: Stack, policy: str) -> tuple[Check, Check]:
    """Delete one policy: its VFs leave the ResourceSlice, and a new claim for them fails."""
    pf = next(p for p in stack.fake_node.pfs if p.netdev == pf_renames(stack.fake_node)["ens2f0"])
    stack.cluster.objects.delete_namespaced_custom_object(
        GROUP, VERSION, OPERATOR_NAMESPACE, "sriovnetworknodepolicies", policy
    )
    remaining = frozenset(vf.pci for vf in stack.fake_node.vfs if vf.pf != pf.netdev)
    try:
        stack.driver.wait_advertised(remaining)
        gone = check(
            f"deleting {policy} removes its VFs ({pf.netdev}) from the ResourceSlice",
            True,
            f"{len(remaining)} VF(s) left",
        )
    except WaitTimeout as exc:
        return check(
            f"deleting {policy} removes its VFs ({pf.netdev}) from the ResourceSlice", False, exc.message
        ), Check(
            "a new claim for the withdrawn VFs fails visibly", FAIL, "not tried: the VFs are still advertised"
        )
    return gone, probe_withdrawn_claim(stack, pf.netdev)


def probe_withdrawn_claim(stack: Stack, pf_name: str) -> Check:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": PROBE_POD, "namespace": WORKLOAD_NS},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "vf",
                            "exactly": {
                                "deviceClassName": "sriov-pcie-netdevice",
                                "count": 1,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": f'device.attributes["{DRIVER}"].PFName == "{pf_name}"'
                                        }
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }
    pairs = load_examples("multus-auto-gpu-nic-pairs.yaml")
    pod = copy.deepcopy(find(pairs, "Pod"))
    pod["metadata"]["name"] = PROBE_POD
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": PROBE_POD}]
    name = f"a new claim for {pf_name}'s withdrawn VFs fails visibly (the Pod stays unschedulable)"
    stack.cluster.apply([template])
    try:
        stack.cluster.create_pod(pod)

        def unschedulable() -> dict[str, Any] | None:
            live = stack.cluster.read_pod(WORKLOAD_NS, PROBE_POD) or {}
            cond = next(
                (
                    c
                    for c in (live.get("status") or {}).get("conditions") or []
                    if c["type"] == "PodScheduled"
                ),
                None,
            )
            return (
                cond
                if cond and cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
                else None
            )

        try:
            cond = wait_for(
                unschedulable, READY_TIMEOUT, what=f"Pod {PROBE_POD} Unschedulable", interval=0.25
            )
        except WaitTimeout as exc:
            return check(name, False, exc.message)
        live = stack.cluster.read_pod(WORKLOAD_NS, PROBE_POD) or {}
        phase = (live.get("status") or {}).get("phase")
        return check(
            name, phase == "Pending" and not live["spec"].get("nodeName"), str(cond.get("message", ""))[:200]
        )
    finally:
        stop_pod(stack, pod)
        stack.cluster.delete([template])


# -- the scenario ---------------------------------------------------------------------------------


def run_operator_rails(stack: Stack) -> Result:
    result = Result("operator-rails", "thick" if stack.thick else "thin", stack.kubelet_kind, timings={})
    started = time.monotonic()
    with Operator(stack) as operator:
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


@contextlib.contextmanager
def _workload(stack: Stack, workload: Workload) -> Iterator[dict[str, tuple[str, str, str]]]:
    stack.cluster.apply(list(workload.workload))
    try:
        stack.gpus.publish()
        stack.driver.wait_advertised(workload.advertised)
        yield source_snapshot(stack, workload)
    finally:
        stack.cluster.delete(list(workload.workload))
