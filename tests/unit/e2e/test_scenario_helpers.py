"""Pure parts of the simulated kubelet and the end-to-end scenario: claim resolution, CNI_ARGS,
manifest substitution, the table and the checks' verdicts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from testbed.checks import check_interfaces, check_no_user_selection, check_sources_unchanged
from testbed.driver import DRIVER
from testbed.kubelet_sim import (
    KubeletError,
    PodRecord,
    Sandbox,
    SimulatedKubelet,
    claim_drivers,
    pod_claim_names,
    pod_ips,
)
from testbed.observation import Observed
from testbed.results import FAIL, PASS, SKIP, Check, Result, Row, render_checks, render_table
from testbed.workloads import Workload, find, load_examples, substitute


def _pod(spec_claims, statuses=None):
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"resourceClaims": spec_claims},
        "status": {"resourceClaimStatuses": statuses} if statuses is not None else {},
    }


def test_claim_names_resolve_direct_and_template_claims_and_skip_absent_ones() -> None:
    pod = _pod(
        [
            {"name": "a", "resourceClaimName": "shared"},
            {"name": "b", "resourceClaimTemplateName": "t"},
            {"name": "c", "resourceClaimTemplateName": "t"},
            {"name": "d", "resourceClaimName": "shared"},
        ],
        [{"name": "b", "resourceClaimName": "p-b-x1"}, {"name": "c"}],
    )
    assert pod_claim_names(pod) == ["shared", "p-b-x1"]


def test_the_extended_resource_claim_is_named_by_the_pods_status_alone() -> None:
    pod = _pod([{"name": "a", "resourceClaimName": "shared"}])
    pod["status"]["extendedResourceClaimStatus"] = {"resourceClaimName": "p-extended-resources-x1"}
    assert pod_claim_names(pod) == ["shared", "p-extended-resources-x1"]


def test_a_template_claim_not_yet_generated_makes_kubelet_wait() -> None:
    pod = _pod([{"name": "b", "resourceClaimTemplateName": "t"}])
    with pytest.raises(KubeletError) as err:
        pod_claim_names(pod)
    assert err.value.reason == "ClaimNotGenerated"


def test_claim_drivers_needs_an_allocation() -> None:
    claim: dict[str, Any] = {"metadata": {"name": "c"}, "status": {}}
    with pytest.raises(KubeletError) as err:
        claim_drivers(claim)
    assert err.value.reason == "ClaimNotAllocated"
    claim["status"] = {
        "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com"}, {"driver": DRIVER}]}}
    }
    assert claim_drivers(claim) == {"gpu.nvidia.com", DRIVER}


def test_sandbox_passes_containerd_style_cni_args_naming_its_own_container() -> None:
    box = Sandbox("ns", "pod", "uid-1", "ks-1")
    assert box.netns_path == "/run/netns/ks-1"
    assert box.container_id.startswith("cnitool-") and len(box.container_id) == len("cnitool-") + 20
    assert box.container_id != Sandbox("ns", "pod", "uid-1", "ks-2").container_id
    pairs = dict(p.split("=", 1) for p in box.cni_args().split(";"))
    assert pairs == {
        "IgnoreUnknown": "1",
        "K8S_POD_NAMESPACE": "ns",
        "K8S_POD_NAME": "pod",
        "K8S_POD_INFRA_CONTAINER_ID": box.container_id,
        "K8S_POD_UID": "uid-1",
    }


def test_pod_ips_strip_prefix_lengths() -> None:
    assert pod_ips({"ips": [{"address": "10.0.0.2/24"}, {"address": "fd00::2/64"}]}) == [
        "10.0.0.2",
        "fd00::2",
    ]
    assert pod_ips({}) == []


def test_substitution_touches_only_pf_names_and_the_whereabouts_datastore() -> None:
    docs = load_examples("multus-auto-gpu-nic-pairs.yaml")
    ipam = {"configuration_path": "/x/whereabouts.conf", "kubernetes": {"kubeconfig": "/x/kc"}}
    out = substitute(docs, {"ens1f0": "fab1ens1f0", "ens2f0": "fab1ens2f0"}, ipam)
    assert len(out) == len(docs)
    changed = [(a["kind"], a["metadata"]["name"]) for a, b in zip(docs, out, strict=True) if a != b]
    assert sorted(changed) == [
        ("NetworkAttachmentDefinition", "rail-a-net"),
        ("NetworkAttachmentDefinition", "rail-b-net"),
        ("SriovResourcePolicy", "dual-rail-netdevice-policy"),
    ]
    policy = find(out, "SriovResourcePolicy")
    assert [c["resourceFilters"][0]["pfNames"] for c in policy["spec"]["configs"]] == [
        ["fab1ens1f0"],
        ["fab1ens2f0"],
    ]
    for name in ("rail-a-net", "rail-b-net"):
        before = json.loads(find(docs, "NetworkAttachmentDefinition", name)["spec"]["config"])
        after = json.loads(find(out, "NetworkAttachmentDefinition", name)["spec"]["config"])
        assert after["ipam"] == {**before["ipam"], **ipam}
        assert {k: v for k, v in after.items() if k != "ipam"} == {
            k: v for k, v in before.items() if k != "ipam"
        }
    # the inputs are untouched
    assert find(docs, "SriovResourcePolicy")["spec"]["configs"][0]["resourceFilters"][0]["pfNames"] == [
        "ens1f0"
    ]


def _row(request: str, interface: str, ip: str = "192.0.2.10/24") -> Row:
    return Row(
        request, "gpu-0", "0000:17:00.2", "pci0000:16", "rail-a", "ns/src", "dra-sriov-x", interface, ip
    )


def _observed(rows, annotations=None) -> Observed:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations or {}}}
    return Observed(pod=pod, claim={}, shadows=[], links={}, rows=rows)


def test_interfaces_must_follow_request_order() -> None:
    good = check_interfaces(_observed([_row("nic-0", "dra0"), _row("nic-1", "dra1")]))
    assert (good.status, good.name) == (PASS, "nic-0 and nic-1 become dra0 and dra1")
    swapped = check_interfaces(_observed([_row("nic-0", "dra1"), _row("nic-1", "dra0")]))
    assert swapped.status == FAIL
    assert check_interfaces(_observed([])).status == FAIL


def test_a_selection_the_driver_did_not_generate_fails_the_no_user_selection_check() -> None:
    workload = Workload(
        "w",
        admin=(),
        workload=({"kind": "ResourceClaimTemplate", "metadata": {"name": "t"}},),
        pod={"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}},
        advertised=frozenset(),
    )
    registry = {"entries": [{"namespace": "ns", "name": "dra-sriov-x", "interface": "dra0"}]}
    owned = [{"name": "dra-sriov-x", "namespace": "ns", "interface": "dra0"}]
    annotations = {
        keys.REGISTRY_ANNOTATION: json.dumps(registry),
        keys.NETWORKS_ANNOTATION: json.dumps(owned),
    }
    assert check_no_user_selection(_observed([], annotations), workload, ["src"]).status == PASS
    annotations[keys.NETWORKS_ANNOTATION] = json.dumps([*owned, {"name": "src"}])
    failed = check_no_user_selection(_observed([], annotations), workload, ["src"])
    assert failed.status == FAIL and "nobody generated" in failed.detail
    naming = Workload(
        "w", (), ({"kind": "DeviceClass", "spec": "netAttachDefName: src"},), workload.pod, frozenset()
    )
    assert check_no_user_selection(_observed([], {}), naming, ["src"]).status == FAIL


def test_sources_unchanged_compares_uid_version_and_config() -> None:
    before = {"a": ("u", "1", "{}")}
    assert check_sources_unchanged(before, dict(before)).status == PASS
    assert check_sources_unchanged(before, {"a": ("u", "2", "{}")}).status == FAIL
    assert check_sources_unchanged(before, {}).status == FAIL


def test_result_is_ok_unless_something_failed_and_renders_one_line_per_row() -> None:
    result = Result("s", "thick", rows=[_row("nic-0", "dra0"), _row("nic-1", "dra1", "198.51.100.10/24")])
    result.checks = [Check("a", PASS), Check("b", SKIP, "thin mode")]
    ok_before = result.ok
    result.after_teardown = [Check("c", FAIL, "left: x")]
    assert ok_before and not result.ok
    assert result.to_json()["ok"] is False
    lines = render_table(result.rows).splitlines()
    assert lines[0].split()[:2] == ["request", "GPU"] and len(lines) == 4
    assert "198.51.100.10/24" in lines[3] and "dra1" in lines[3]
    text = render_checks(result.checks)
    assert "PASS  a" in text and "SKIP  b\n        thin mode" in text


class _Steps:
    """A DRA plugin and a sandbox network that only record what kubelet asked, in order; the
    first ``del_failures`` DELs and ``unprepare_failures`` unprepares fail."""

    def __init__(self, del_failures: int = 0, unprepare_failures: int = 0) -> None:
        self.steps: list[str] = []
        self.del_failures = del_failures
        self.unprepare_failures = unprepare_failures

    def prepare(self, claims):
        self.steps.append("prepare")
        return {uid: type("Answer", (), {"error": ""})() for _, _, uid in claims}

    def unprepare(self, claims):
        self.steps.append("unprepare " + ",".join(uid for _, _, uid in claims))
        error = "busy" if self.unprepare_failures > 0 else ""
        self.unprepare_failures -= 1
        return {uid: type("Answer", (), {"error": error})() for _, _, uid in claims}

    def add(self, sandbox):
        self.steps.append("ADD")
        return {}

    def delete(self, sandbox):
        self.steps.append("DEL " + sandbox.netns)
        if self.del_failures > 0:
            self.del_failures -= 1
            raise KubeletError("CniDelFailed", f"CNI DEL for {sandbox.pod}: delegate failed")


class _Core:
    """The two Pod calls kubelet makes around a start and a termination, recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def patch_namespaced_pod_status(self, name, namespace, body):
        self.calls.append(f"status {name} {body['status']['phase']}")

    def delete_namespaced_pod(self, name, namespace, body):
        self.calls.append(f"delete {name}")


def _kubelet(steps: _Steps) -> SimulatedKubelet:
    kubelet = SimulatedKubelet(client.ApiClient(), "node", {DRIVER: steps}, steps)
    kubelet.core = _Core()  # type: ignore[assignment]
    return kubelet


def _record(uid: str = "u1") -> PodRecord:
    # A netns that does not exist: its removal is "already gone", which is done.
    return PodRecord(Sandbox("ns", "p", uid, "ks-none"), {DRIVER: [("ns", "c", "cu1")]}, {})


def test_teardown_runs_cni_del_before_unprepare_like_kubelet() -> None:
    steps = _Steps()
    kubelet = _kubelet(steps)
    record = _record()
    kubelet._teardown(record)
    assert steps.steps == ["DEL ks-none", "unprepare cu1"]


def test_a_failed_teardown_of_a_force_deleted_pod_is_kept_and_retried_by_housekeeping() -> None:
    steps = _Steps(del_failures=1)
    kubelet = _kubelet(steps)
    kubelet.pods["u1"] = _record()
    kubelet._forget({"metadata": {"uid": "u1"}})
    assert "u1" in kubelet.pods and "delegate failed" in kubelet.errors["u1"]
    kubelet._housekeeping(listed={"other-pod"})
    assert kubelet.pods == {} and "u1" not in kubelet.errors
    assert steps.steps == ["DEL ks-none", "DEL ks-none", "unprepare cu1"]


def test_housekeeping_leaves_the_sandboxes_of_listed_pods_alone() -> None:
    steps = _Steps()
    kubelet = _kubelet(steps)
    kubelet.pods["u1"] = _record()
    kubelet._housekeeping(listed={"u1"})
    assert set(kubelet.pods) == {"u1"} and steps.steps == []


def test_a_failed_unprepare_is_retried_without_a_second_del() -> None:
    steps = _Steps(unprepare_failures=1)
    kubelet = _kubelet(steps)
    kubelet.pods["u1"] = _record()
    with pytest.raises(KubeletError, match="busy"):
        kubelet._release("u1")
    assert kubelet.pods["u1"].stopped
    kubelet._release("u1")
    assert kubelet.pods == {}
    assert steps.steps == ["DEL ks-none", "unprepare cu1", "unprepare cu1"]


def test_release_all_tears_down_what_is_left_and_names_each_pod() -> None:
    steps = _Steps(del_failures=1)
    kubelet = _kubelet(steps)
    kubelet.pods["u1"] = _record("u1")
    kubelet.pods["u2"] = PodRecord(Sandbox("ns", "q", "u2", "ks-none2"), {}, {})
    held = kubelet.release_all()
    assert kubelet.pods == {}
    assert held[0].startswith("Pod ns/p still had sandbox ks-none; its teardown failed")
    assert held[1] == "Pod ns/q still had sandbox ks-none2"
    assert steps.steps == ["DEL ks-none", "DEL ks-none2"]


def test_a_host_network_pod_gets_no_netns_and_no_cni_but_its_claims_are_unprepared() -> None:
    steps = _Steps()
    kubelet = _kubelet(steps)
    kubelet._claims_by_driver = lambda pod: {DRIVER: [("ns", "c", "cu1")]}  # type: ignore[method-assign]
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
        "spec": {"hostNetwork": True},
        "status": {"phase": "Pending"},
    }
    kubelet.sync(pod)
    assert kubelet.errors == {} and kubelet.created == [] and kubelet.pods == {}
    assert steps.steps == ["prepare"]
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    kubelet.sync(pod)
    assert kubelet.errors == {} and kubelet.host_pods == {}
    assert steps.steps == ["prepare", "unprepare cu1"]
    assert kubelet.core.calls == ["status p Running", "delete p"]  # type: ignore[attr-defined]
