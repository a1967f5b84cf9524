"""Pure parts of the simulated kubelet and the end-to-end scenario: claim resolution, CNI_ARGS,
manifest substitution, the table and the checks' verdicts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from sriov_contract import keys
from tests.bed import e2e
from tests.bed.kubelet_sim import (
    KubeletError,
    PodRecord,
    Sandbox,
    SimulatedKubelet,
    claim_drivers,
    pod_claim_names,
    pod_ips,
)


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
        "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com"}, {"driver": e2e.DRIVER}]}}
    }
    assert claim_drivers(claim) == {"gpu.nvidia.com", e2e.DRIVER}


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
    docs = e2e.load_examples("multus-auto-gpu-nic-pairs.yaml")
    ipam = {"configuration_path": "/x/whereabouts.conf", "kubernetes": {"kubeconfig": "/x/kc"}}
    out = e2e.substitute(docs, {"ens1f0": "fab1ens1f0", "ens2f0": "fab1ens2f0"}, ipam)
    assert len(out) == len(docs)
    changed = [(a["kind"], a["metadata"]["name"]) for a, b in zip(docs, out, strict=True) if a != b]
    assert sorted(changed) == [
        ("NetworkAttachmentDefinition", "rail-a-net"),
        ("NetworkAttachmentDefinition", "rail-b-net"),
        ("SriovResourcePolicy", "dual-rail-netdevice-policy"),
    ]
    policy = e2e.find(out, "SriovResourcePolicy")
    assert [c["resourceFilters"][0]["pfNames"] for c in policy["spec"]["configs"]] == [
        ["fab1ens1f0"],
        ["fab1ens2f0"],
    ]
    for name in ("rail-a-net", "rail-b-net"):
        before = json.loads(e2e.find(docs, "NetworkAttachmentDefinition", name)["spec"]["config"])
        after = json.loads(e2e.find(out, "NetworkAttachmentDefinition", name)["spec"]["config"])
        assert after["ipam"] == {**before["ipam"], **ipam}
        assert {k: v for k, v in after.items() if k != "ipam"} == {
            k: v for k, v in before.items() if k != "ipam"
        }
    # the inputs are untouched
    assert e2e.find(docs, "SriovResourcePolicy")["spec"]["configs"][0]["resourceFilters"][0]["pfNames"] == [
        "ens1f0"
    ]


def _row(request: str, interface: str, ip: str = "192.0.2.10/24") -> e2e.Row:
    return e2e.Row(
        request, "gpu-0", "0000:17:00.2", "pci0000:16", "rail-a", "ns/src", "dra-sriov-x", interface, ip
    )


def _observed(rows, annotations=None) -> e2e.Observed:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations or {}}}
    return e2e.Observed(pod=pod, claim={}, shadows=[], links={}, rows=rows)


def test_interfaces_must_follow_request_order() -> None:
    good = e2e.check_interfaces(_observed([_row("nic-0", "dra0"), _row("nic-1", "dra1")]))
    assert (good.status, good.name) == (e2e.PASS, "nic-0 and nic-1 become dra0 and dra1")
    swapped = e2e.check_interfaces(_observed([_row("nic-0", "dra1"), _row("nic-1", "dra0")]))
    assert swapped.status == e2e.FAIL
    assert e2e.check_interfaces(_observed([])).status == e2e.FAIL


def test_a_selection_the_driver_did_not_generate_fails_the_no_user_selection_check() -> None:
    workload = e2e.Workload(
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
    assert e2e.check_no_user_selection(_observed([], annotations), workload, ["src"]).status == e2e.PASS
    annotations[keys.NETWORKS_ANNOTATION] = json.dumps([*owned, {"name": "src"}])
    failed = e2e.check_no_user_selection(_observed([], annotations), workload, ["src"])
    assert failed.status == e2e.FAIL and "nobody generated" in failed.detail
    naming = e2e.Workload(
        "w", (), ({"kind": "DeviceClass", "spec": "netAttachDefName: src"},), workload.pod, frozenset()
    )
    assert e2e.check_no_user_selection(_observed([], {}), naming, ["src"]).status == e2e.FAIL


def test_sources_unchanged_compares_uid_version_and_config() -> None:
    before = {"a": ("u", "1", "{}")}
    assert e2e.check_sources_unchanged(before, dict(before)).status == e2e.PASS
    assert e2e.check_sources_unchanged(before, {"a": ("u", "2", "{}")}).status == e2e.FAIL
    assert e2e.check_sources_unchanged(before, {}).status == e2e.FAIL


def test_result_is_ok_unless_something_failed_and_renders_one_line_per_row() -> None:
    result = e2e.Result("s", "thick", rows=[_row("nic-0", "dra0"), _row("nic-1", "dra1", "198.51.100.10/24")])
    result.checks = [e2e.Check("a", e2e.PASS), e2e.Check("b", e2e.SKIP, "thin mode")]
    ok_before = result.ok
    result.after_teardown = [e2e.Check("c", e2e.FAIL, "left: x")]
    assert ok_before and not result.ok
    assert result.to_json()["ok"] is False
    lines = e2e.render_table(result.rows).splitlines()
    assert lines[0].split()[:2] == ["request", "GPU"] and len(lines) == 4
    assert "198.51.100.10/24" in lines[3] and "dra1" in lines[3]
    text = e2e.render_checks(result.checks)
    assert "PASS  a" in text and "SKIP  b\n        thin mode" in text


class _Steps:
    """A DRA plugin and a sandbox network that only record what kubelet asked, in order."""

    def __init__(self) -> None:
        self.steps: list[str] = []

    def prepare(self, claims):
        self.steps.append("prepare")
        return {}

    def unprepare(self, claims):
        self.steps.append("unprepare " + ",".join(uid for _, _, uid in claims))
        return {uid: type("Answer", (), {"error": ""})() for _, _, uid in claims}

    def add(self, sandbox):
        self.steps.append("ADD")
        return {}

    def delete(self, sandbox):
        self.steps.append("DEL " + sandbox.netns)


def test_teardown_runs_cni_del_before_unprepare_like_kubelet() -> None:
    steps = _Steps()
    kubelet = SimulatedKubelet(client.ApiClient(), "node", {e2e.DRIVER: steps}, steps)
    record = PodRecord(Sandbox("ns", "p", "u1", "ks-none"), {e2e.DRIVER: [("ns", "c", "cu1")]}, {})
    kubelet._teardown(record)
    assert steps.steps == ["DEL ks-none", "unprepare cu1"]
