"""Managed prepare and release over the in-memory API: the forward sequence, retries that keep
state, strict release order, and every out-of-envelope claim refused before any VF is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sriov_contract.binding import parse_binding
from sriov_contract.keys import (
    BINDING_ANNOTATION,
    PROTECTION_FINALIZER,
    REGISTRY_ANNOTATION,
    RESOURCE_NAME_ANNOTATION,
)
from sriov_contract.registry import parse_registry
from tests.fakes.driver_env import NAME_ATTR, NODE, NODE_UID, NS, NS_ATTR, SOURCE_CONFIG, Env, vf_config
from tests.fakes.kube_api import Fault
from tests.support.checkpoint import managed_binding

VF1, VF2 = "0000-17-00-1", "0000-17-00-2"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path)
    e.source_nad()
    return e


def test_prepare_creates_protected_shadow_and_pod_selection_then_release_undoes_all(env: Env) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    out = env.prepare(ref)
    assert out.error == "" and [d.device for d in out.devices] == [VF1]

    (shadow,) = env.shadows()
    md = shadow["metadata"]
    assert md["namespace"] == NS and md["name"].startswith("dra-sriov-") and len(md["name"]) == 42
    assert md["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "pod",
            "uid": pod["metadata"]["uid"],
            "blockOwnerDeletion": False,
        }
    ]
    assert md["finalizers"] == [PROTECTION_FINALIZER]
    assert RESOURCE_NAME_ANNOTATION not in md["annotations"] and "team" not in md["labels"]
    binding = parse_binding(md["annotations"][BINDING_ANNOTATION])
    assert (binding.pod_uid, binding.claim_uid, binding.node_uid, binding.node_name) == (
        pod["metadata"]["uid"],
        ref.uid,
        NODE_UID,
        NODE,
    )
    assert (binding.pci_address, binding.interface, binding.source.name) == ("0000:17:00.1", "dra0", "rail-a")
    config = json.loads(shadow["spec"]["config"])
    assert config["deviceID"] == "0000:17:00.1" and config["name"] == "rail-a" and config["vlan"] == 100
    assert config["ipam"] == json.loads(SOURCE_CONFIG)["ipam"]

    assert env.networks(pod) == [{"name": md["name"], "namespace": NS, "interface": "dra0"}]
    registry = parse_registry(env.live_pod(pod)["metadata"]["annotations"][REGISTRY_ANNOTATION])
    assert [(e.uid, e.claim_uid) for e in registry.entries] == [(md["uid"], ref.uid)]
    assert env.phases(ref.uid) == ["Ready"]
    assert managed_binding(env.checkpoint, ref.uid)["shadowUID"] == md["uid"]

    # the already-prepared path answers from the checkpoint without writing anything
    writes = len(env.api.writes)
    assert env.prepare(ref).error == ""
    assert len(env.api.writes) == writes

    assert env.unprepare(ref) == ""
    assert env.shadows() == []
    assert env.networks(pod) == []
    assert REGISTRY_ANNOTATION not in (env.live_pod(pod)["metadata"].get("annotations") or {})
    assert env.checkpoint.snapshot_all() == []
    assert ("restore", "0000:17:00.1", "") not in env.hardware_calls()  # an empty driver was never rebound
    assert not env.cdi.exists(ref.uid) and not env.cdi.exists(pod["metadata"]["uid"])
    assert env.unprepare(ref) == ""  # idempotent


@pytest.mark.parametrize(
    "edit",
    [
        lambda o: o["spec"].update(config='{"type":"sriov","deviceID":"0000:17:00.7"}'),
        lambda o: o["metadata"]["labels"].clear(),
        lambda o: o["metadata"]["annotations"].clear(),
    ],
    ids=["config", "labels", "binding"],
)
def test_a_pod_whose_shadow_was_edited_still_releases_cleanly(env: Env, edit) -> None:
    """Issue 31: the recorded shadow (its UID is the driver's) goes whatever was done to it."""
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    edit(env.api.objects[("nads", NS, shadow["metadata"]["name"])])
    assert env.unprepare(ref) == ""
    assert env.shadows() == []
    assert env.networks(pod) == []
    assert env.checkpoint.snapshot_all() == []


def test_release_order_is_deleting_shadow_pod_hardware_releasecomplete_finalizer_forget(env: Env) -> None:
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a", driver="mlx5_core")])
    assert env.prepare(ref).error == ""
    observed: list[str] = []
    real_write = env.checkpoint._storage.write

    def write(data: bytes) -> None:
        claims = json.loads(data)["data"]["claims"]
        observed.append(
            claims[ref.uid]["devices"][0]["managedBinding"]["phase"] if ref.uid in claims else "gone"
        )
        real_write(data)

    env.checkpoint._storage.write = write  # type: ignore[method-assign]
    env.api.writes.clear()
    env.vf_driver.calls.clear()
    assert env.unprepare(ref) == ""
    assert observed == ["Deleting", "ReleaseComplete", "gone"]
    verbs = [(v, k) for v, k, _ in env.api.writes]
    assert verbs == [("delete", "nads"), ("patch", "pods"), ("patch", "nads")]
    assert [c[:2] for c in env.hardware_calls()] == [("restore", "0000:17:00.1")]


def test_lost_create_response_is_adopted_only_on_full_match(env: Env) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    env.api.fail("create", "nads", Fault(0, applied=True))
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    assert managed_binding(env.checkpoint, ref.uid)["shadowUID"] == shadow["metadata"]["uid"]
    assert env.networks(pod)[0]["name"] == shadow["metadata"]["name"]


def test_unrelated_object_under_the_shadow_name_is_never_touched_and_state_is_kept(env: Env) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    env.api.fail("create", "nads", Fault(0, applied=True))
    env.api.fail("patch", "pods", Fault(403))
    assert env.prepare(ref).error.startswith("AccessDenied:")
    (shadow,) = env.shadows()
    # someone replaces the shadow's content; the driver must refuse, not overwrite
    env.api.objects[("nads", NS, shadow["metadata"]["name"])]["spec"]["config"] = '{"type":"sriov"}'
    out = env.prepare(ref)
    assert out.error.startswith("ShadowConflict:"), out.error
    assert env.api.stored("nads", NS, shadow["metadata"]["name"])["spec"]["config"] == '{"type":"sriov"}'
    assert env.phases(ref.uid) == ["Pending"]  # no destructive rollback after Pending
    assert env.cdi.exists(ref.uid)
    assert env.networks(pod) == []


def test_forbidden_and_conflicting_pod_patches_keep_state_and_retry_forward(env: Env) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    env.api.fail("patch", "pods", Fault(422, times=10))
    out = env.prepare(ref)
    assert out.error.startswith("PodPatchRetriesExhausted:"), out.error
    assert env.phases(ref.uid) == ["Pending"] and len(env.sleeps) == 6
    # a single conflict is absorbed by one re-read
    env.api.faults.clear()
    env.api.fail("patch", "pods", Fault(409))
    assert env.prepare(ref).error == ""
    assert env.phases(ref.uid) == ["Ready"] and len(env.networks(pod)) == 1
    assert len(env.shadows()) == 1


def test_two_claims_of_one_pod_number_interfaces_across_claims_and_release_independently(env: Env) -> None:
    pod = env.pod(
        claims=[{"name": "b-net", "resourceClaimName": "cb"}, {"name": "a-net", "resourceClaimName": "ca"}]
    )
    configs = [vf_config(netAttachDefName="rail-a")]
    ca = env.claim("ca", pod, [VF2], configs)
    cb = env.claim("cb", pod, [VF1], configs)
    # kubelet prepares b first: its interface still comes after a's (alias order), never RPC order
    assert env.prepare(cb).error == ""
    assert [n["interface"] for n in env.networks(pod)] == ["dra1"]
    assert env.prepare(ca).error == ""
    assert [n["interface"] for n in env.networks(pod)] == ["dra1", "dra0"]
    spec = json.loads(env.cdi.path(pod["metadata"]["uid"]).read_text())
    assert "0000:17:00.1,0000:17:00.2" in spec["devices"][0]["containerEdits"]["env"][0]

    assert env.unprepare(ca) == ""
    assert [n["interface"] for n in env.networks(pod)] == ["dra1"]
    assert len(env.shadows()) == 1 and env.phases(cb.uid) == ["Ready"]
    spec = json.loads(env.cdi.path(pod["metadata"]["uid"]).read_text())
    assert spec["devices"][0]["containerEdits"]["env"] == ["SRIOVNETWORK_PCI_ADDRESSES=0000:17:00.1"]


def test_manual_entries_and_foreign_finalizers_are_preserved(env: Env) -> None:
    env.source_nad("manual")
    pod = env.pod(claims=[{"name": "vfs", "resourceClaimName": "c"}])
    env.api.objects[("pods", NS, "pod")]["metadata"]["annotations"] = {
        "k8s.v1.cni.cncf.io/networks": '[{"name":"manual","ips":["10.0.0.5/24"]}]'
    }
    ref = env.claim("c", pod, [VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    name = shadow["metadata"]["name"]
    assert env.networks(pod)[0] == {"name": "manual", "ips": ["10.0.0.5/24"]}
    env.api.objects[("nads", NS, name)]["metadata"]["finalizers"].insert(0, "example.com/keep")
    env.api.fail("patch", "nads", Fault(422))
    assert env.unprepare(ref) == ""
    kept = env.api.stored("nads", NS, name)
    assert kept["metadata"]["finalizers"] == ["example.com/keep"] and kept["metadata"]["deletionTimestamp"]
    assert env.networks(pod) == [{"name": "manual", "ips": ["10.0.0.5/24"]}]
    assert env.checkpoint.snapshot_all() == []


def test_release_complete_retry_skips_hardware(env: Env) -> None:
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a", driver="mlx5_core")])
    assert env.prepare(ref).error == ""
    env.api.fail("patch", "nads", Fault(403))
    assert env.unprepare(ref).startswith("AccessDenied:")
    assert env.phases(ref.uid) == ["ReleaseComplete"]
    restores = [c for c in env.hardware_calls() if c[0] == "restore"]
    # a new Pod cannot take the claim UID while the record is there
    env.restart()
    assert env.unprepare(ref) == ""
    assert [c for c in env.hardware_calls() if c[0] == "restore"] == restores
    assert env.shadows() == [] and env.checkpoint.snapshot_all() == []


def test_claim_reuse_waits_for_release_then_gets_a_new_identity(env: Env) -> None:
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (first,) = env.shadows()
    # the claim is handed to a new Pod before kubelet unprepared it for the old one
    new_pod = env.pod("pod2", claims=[{"name": "vfs", "resourceClaimName": "c"}])
    claim = env.api.objects[("claims", NS, "c")]
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "pod2", "uid": new_pod["metadata"]["uid"]}]
    assert env.prepare(ref).error.startswith("ClaimReleaseInProgress:")
    assert env.unprepare(ref) == ""
    assert env.prepare(ref).error == ""
    (second,) = env.shadows()
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert second["metadata"]["ownerReferences"][0]["uid"] == new_pod["metadata"]["uid"]


def test_frozen_bytes_win_over_edited_or_deleted_source(env: Env) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    env.api.objects[("nads", NS, "rail-a")]["spec"]["config"] = SOURCE_CONFIG.replace("100", "200")
    assert env.prepare(ref).error == ""
    del env.api.objects[("nads", NS, "rail-a")]
    # the shadow vanished (say, an admin deleted it): repair recreates it from the frozen bytes,
    # forgetting the old UID first so that even a lost Create response is adopted on retry
    del env.api.objects[("nads", NS, shadow["metadata"]["name"])]
    env.api.fail("create", "nads", Fault(0, applied=True))
    env.api.fail("get", "nads", Fault(0, after=1))  # ...and the adopting read fails too
    assert env.prepare(ref).error.startswith("ApiRequestFailed:")
    binding = managed_binding(env.checkpoint, ref.uid)
    assert (binding["phase"], binding["shadowUID"]) == ("Pending", "")
    assert env.prepare(ref).error == ""
    assert env.phases(ref.uid) == ["Ready"]
    (again,) = env.shadows()
    assert again["spec"]["config"] == shadow["spec"]["config"]
    assert again["metadata"]["uid"] != shadow["metadata"]["uid"]
    assert (
        parse_registry(env.live_pod(pod)["metadata"]["annotations"][REGISTRY_ANNOTATION]).entries[0].uid
        == (again["metadata"]["uid"])
    )


def test_old_record_without_binding_is_a_migration_error(env: Env) -> None:
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    # prepared by a driver that ran without --multus-auto-attach, on the same checkpoint
    assert env.plain.prepare([ref])[ref.uid].error == ""
    assert env.prepare(ref).error.startswith("ManagedBindingMissing:")
    assert env.api.writes == []
    assert env.unprepare(ref) == ""  # release still restores it the ordinary way
    assert env.checkpoint.snapshot_all() == [] and list(env.cdi.root.iterdir()) == []


def test_name_only_and_explicit_namespace_references(env: Env) -> None:
    env.source_nad("infra-net", namespace="infra")
    env.eligible[VF1] = {NAME_ATTR: {"string": "infra-net"}, NS_ATTR: {"string": "infra"}}
    env.eligible[VF2] = {NAME_ATTR: {"string": "rail-a"}}
    pod = env.pod(claims=[{"name": "vfs", "resourceClaimName": "c"}])
    ref = env.claim("c", pod, [VF1, VF2])
    assert env.prepare(ref).error == ""
    sources = sorted(
        (
            parse_binding(s["metadata"]["annotations"][BINDING_ANNOTATION]).source.namespace,
            s["metadata"]["namespace"],
        )
        for s in env.shadows()
    )
    assert sources == [(NS, NS), ("infra", NS)]  # shadows always live in the Pod namespace


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (
            lambda c, p: c["status"]["allocation"]["devices"]["results"][0].update(adminAccess=True),
            "AdminAccessUnsupported",
        ),
        (
            lambda c, p: c["status"]["allocation"]["devices"]["results"][0].update(shareID="1"),
            "SharedAllocationUnsupported",
        ),
        (
            lambda c, p: c["status"]["reservedFor"].append({"resource": "pods", "name": "x", "uid": "y"}),
            "MultipleConsumersUnsupported",
        ),
        (lambda c, p: c["status"].update(reservedFor=[]), "ClaimNotReserved"),
        (lambda c, p: c["status"]["reservedFor"][0].update(resource="nodes"), "UnsupportedReservation"),
        (
            lambda c, p: c["status"]["reservedFor"][0].update(
                apiGroup="scheduling.k8s.io", resource="podgroups"
            ),
            "UnsupportedReservation",
        ),
        (
            lambda c, p: c["metadata"].update(
                annotations={"resource.kubernetes.io/extended-resource-claim": "true"}
            ),
            "UnsupportedManagedClaimKind",
        ),
        (
            lambda c, p: p["status"].update(extendedResourceClaimStatus={"resourceClaimName": "c"}),
            "UnsupportedManagedClaimKind",
        ),
        (lambda c, p: p["spec"].update(hostNetwork=True), "HostNetworkUnsupported"),
        (lambda c, p: p["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"), "PodTerminating"),
        (lambda c, p: p["spec"].update(nodeName="other"), "PodOnOtherNode"),
        (lambda c, p: p["metadata"].update(uid="7b1f0e4e-1111-4222-8333-944455556666"), "PodReplaced"),
        (lambda c, p: p["spec"].update(resourceClaims=[]), "ClaimNotReferencedByPod"),
        (
            lambda c, p: c["status"]["allocation"].update(
                devices={"results": c["status"]["allocation"]["devices"]["results"], "config": []}
            ),
            "MissingNetworkTemplate",
        ),
        (
            lambda c, p: c["status"]["allocation"]["devices"].update(
                config=[vf_config(netAttachDefName="nope")]
            ),
            "SourceNetworkNotFound",
        ),
        (
            lambda c, p: c["status"]["allocation"]["devices"].update(
                config=[vf_config(netAttachDefName="rail-a", driver="vfio-pci")]
            ),
            "UnsupportedManagedDriver",
        ),
        (
            lambda c, p: p["metadata"].update(annotations={"k8s.v1.cni.cncf.io/networks": "rail-a"}),
            "ManualSelectionConflictsWithManagedTemplate",
        ),
    ],
)
def test_out_of_envelope_claims_are_refused_before_any_vf_is_touched(env: Env, mutate, reason) -> None:
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    mutate(env.api.objects[("claims", NS, "c")], env.api.objects[("pods", NS, "pod")])
    env.api.writes.clear()
    out = env.prepare(ref)
    assert out.error.startswith(f"{reason}:"), out.error
    assert env.hardware_calls() == [] and env.api.writes == []
    assert env.checkpoint.snapshot_all() == [] and list(env.cdi.root.iterdir()) == []


def test_ineligible_device_and_replaced_node_are_refused_before_hardware(env: Env) -> None:
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    del env.eligible[VF1]
    assert env.prepare(ref).error.startswith("DeviceNotEligible:")
    env.eligible[VF1] = {}
    env.live_node_uid = "7b1f0e4e-1111-4222-8333-944455556666"
    assert env.prepare(ref).error.startswith("NodeReplaced:")
    assert env.hardware_calls() == []


def test_template_claims_resolve_through_pod_status(env: Env) -> None:
    pod = env.pod(
        claims=[
            {"name": "vfs", "resourceClaimTemplateName": "t"},
            {"name": "skipped", "resourceClaimTemplateName": "t2"},
        ]
    )
    ref = env.claim("pod-vfs-abc", pod, [VF1], [vf_config(netAttachDefName="rail-a")])
    live = env.api.objects[("pods", NS, "pod")]
    live["status"]["resourceClaimStatuses"] = [
        {"name": "vfs", "resourceClaimName": "pod-vfs-abc"},
        {"name": "skipped"},
    ]
    # not owned by the Pod: a template claim must be the Pod's own
    assert env.prepare(ref).error.startswith("ClaimNotOwnedByPod:")
    env.api.objects[("claims", NS, "pod-vfs-abc")]["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "pod", "uid": pod["metadata"]["uid"], "controller": True}
    ]
    assert env.prepare(ref).error == ""
    live["status"]["resourceClaimStatuses"] = []
    assert env.unprepare(ref) == ""


def test_an_extended_resource_claim_resolves_through_the_pods_status_and_its_ownership(env: Env) -> None:
    """DRAExtendedResource: `resources.limits` only; the scheduler's claim is reached through
    status.extendedResourceClaimStatus, must be annotated and owned by the Pod, and numbers after
    the Pod's explicit claims."""
    pod = env.pod(claims=[{"name": "vfs", "resourceClaimName": "explicit"}])
    explicit = env.claim("explicit", pod, [VF1], [vf_config(netAttachDefName="rail-a")])
    ref = env.claim(
        "pod-extended-resources-x1",
        pod,
        [VF2],
        [vf_config(netAttachDefName="rail-a")],
        request="container-0-request-0",
    )
    live = env.api.objects[("pods", NS, "pod")]
    live["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "pod-extended-resources-x1",
        "requestMappings": [
            {
                "containerName": "c",
                "resourceName": "openshift.io/sriov_vfs",
                "requestName": "container-0-request-0",
            }
        ],
    }
    claim = env.api.objects[("claims", NS, "pod-extended-resources-x1")]
    assert env.prepare(ref).error.startswith("UnsupportedManagedClaimKind:")  # not the scheduler's
    claim["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert env.prepare(ref).error.startswith("ClaimNotOwnedByPod:")
    claim["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "pod", "uid": pod["metadata"]["uid"], "controller": True}
    ]
    assert env.hardware_calls() == [] and env.shadows() == []
    assert env.prepare(ref).error == "" and env.prepare(explicit).error == ""
    by_claim = {
        parse_binding(s["metadata"]["annotations"][BINDING_ANNOTATION]).claim_uid: s for s in env.shadows()
    }
    interfaces = {
        uid: parse_binding(s["metadata"]["annotations"][BINDING_ANNOTATION]).interface
        for uid, s in by_claim.items()
    }
    assert interfaces == {explicit.uid: "dra0", ref.uid: "dra1"}
    assert sorted(n["interface"] for n in env.networks(pod)) == ["dra0", "dra1"]
    assert env.unprepare(ref) == "" and env.unprepare(explicit) == ""
    assert env.shadows() == [] and env.networks(pod) == [] and env.checkpoint.snapshot_all() == []


def test_every_pod_write_rechecks_pod_and_reservation(env: Env) -> None:
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    fetch = env.service._fetch_claim
    calls = []

    def lost_after_first(r):
        claim = fetch(r)
        calls.append(r)
        if len(calls) > 1:
            claim["status"]["reservedFor"] = []
        return claim

    env.service._fetch_claim = lost_after_first  # type: ignore[method-assign]
    out = env.prepare(ref)
    assert out.error.startswith("ReservationLost:"), out.error
    assert env.phases(ref.uid) == ["Pending"] and env.networks(pod) == []
    env.service._fetch_claim = fetch  # type: ignore[method-assign]
    get_pod = env.api.get_pod
    reads = []

    def moved_after_resolve(namespace, name):
        live = get_pod(namespace, name)
        assert live is not None
        reads.append(name)
        if len(reads) > 1:
            live["spec"]["nodeName"] = "elsewhere"
        return live

    env.api.get_pod = moved_after_resolve  # type: ignore[method-assign]
    assert env.prepare(ref).error.startswith("PodReplaced:")
    assert env.phases(ref.uid) == ["Pending"] and env.networks(pod) == []


def test_claim_with_only_foreign_devices_prepares_and_releases_without_api_writes(env: Env) -> None:
    pod = env.pod(claims=[{"name": "gpu", "resourceClaimName": "g"}])
    gpu = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"}
    ref = env.claim("g", pod, [], extra_results=[gpu])
    out = env.prepare(ref)
    assert out.error == "" and out.devices == ()
    assert env.unprepare(ref) == ""
    assert [w for w in env.api.writes if w[1] == "nads"] == [] and env.checkpoint.snapshot_all() == []


def test_shadows_made_before_a_failed_create_keep_their_uids_and_a_retry_makes_only_the_rest(
    env: Env,
) -> None:
    vfs = [VF1, VF2, "0000-17-00-3"]
    pod, ref = env.pod_with_claim(vfs, [vf_config(netAttachDefName="rail-a")])
    env.api.fail("create", "nads", Fault(500))
    assert env.prepare(ref).error != ""
    made = {s["metadata"]["name"]: s["metadata"]["uid"] for s in env.shadows()}
    assert len(made) == len(vfs) - 1
    # The created shadows' UIDs are in the checkpoint (one write for all), the failed one has none.
    recorded = [managed_binding(env.checkpoint, ref.uid, i)["shadowUID"] for i in range(len(vfs))]
    assert sorted(u for u in recorded if u) == sorted(made.values()) and recorded.count("") == 1
    env.api.writes.clear()
    assert env.prepare(ref).error == ""
    assert [(v, k) for v, k, _ in env.api.writes] == [("create", "nads"), ("patch", "pods")]
    assert len(env.networks(pod)) == len(vfs) and env.phases(ref.uid) == ["Ready"] * len(vfs)
