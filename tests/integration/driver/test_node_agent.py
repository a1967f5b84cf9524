"""The real node agent process against the real API server and scheduler, on the fake SR-IOV node,
with the fake kubelet dialing its real unix sockets."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from testbed.claims import allocated_claim, claim_ref, custom_objects
from testbed.fake_kubelet import KubeletDirs
from testbed.node_agent import DRIVER, node_slices, put_attributes, put_policy, vf_names, wait_published
from testbed.waiting import wait_for
from tests.support.kubelet import watch_resources

pytestmark = [pytest.mark.integration, pytest.mark.netns]

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


# -- tests ---------------------------------------------------------------------------------------


def test_registration_handshake(agent, fake_kubelet_factory) -> None:
    agent.start()
    kubelet = fake_kubelet_factory(agent.dirs.registry, timeout=30)
    info = kubelet.register()
    assert (info.type, info.name) == ("DRAPlugin", DRIVER)
    assert info.endpoint == str(agent.dirs.plugins / DRIVER / "dra.sock")
    assert info.supported_versions[0] == "v1.DRAPlugin"
    assert kubelet.prepare([]) == {}
    wait_for(
        lambda: "kubelet registered the plugin" in agent.output(),
        10,
        what="the agent to log the registration",
    )


def test_slices_follow_policies_and_survive_deletion(agent, testbed, k8s_namespace, fake_node) -> None:
    agent.start()
    # opt-in: no policy, one empty slice owned by the Node
    wait_for(lambda: node_slices(testbed), 30, what="initial empty ResourceSlice")
    (s,) = node_slices(testbed)
    assert not s["spec"].get("devices")
    assert s["metadata"]["ownerReferences"][0]["uid"] == testbed.node_uid

    put_policy(testbed, k8s_namespace, "all", {"configs": [{}]})
    pub = wait_published(testbed, lambda p: set(p) == vf_names(fake_node), "every VF advertised")
    vf = fake_node.vfs[0]
    attrs = pub[vf.pci.replace(":", "-").replace(".", "-")]
    assert attrs[PCIE_ROOT] == {"string": vf.pcie_root}
    assert attrs["resource.kubernetes.io/pciBusID"] == {"string": vf.pci}
    assert attrs["k8s.cni.cncf.io/deviceID"] == {"string": vf.pci}
    assert attrs[f"{DRIVER}/PFName"] == {"string": vf.pf}
    assert attrs[f"{DRIVER}/vfID"] == {"int": vf.vf_index}

    # a policy naming a rail with attributes; "a-rail" sorts before "all" so it wins for its PF
    rail_a = fake_node.rail_vfs("rail-a")
    put_attributes(
        testbed,
        k8s_namespace,
        "rail-a",
        {"rail": "a"},
        {f"{DRIVER}/netAttachDefName": {"string": "rail-a-net"}},
    )
    put_policy(
        testbed,
        k8s_namespace,
        "a-rail",
        {
            "configs": [
                {
                    "resourceFilters": [{"pfNames": [rail_a[0].pf]}],
                    "deviceAttributesSelector": {"matchLabels": {"rail": "a"}},
                }
            ]
        },
    )
    rail_a_names = {v.pci.replace(":", "-").replace(".", "-") for v in rail_a}
    wait_published(
        testbed,
        lambda p: all(p.get(n, {}).get(f"{DRIVER}/netAttachDefName") for n in rail_a_names),
        "rail-a attribute published",
    )

    # withdraw everything but rail-a: devices with an empty policy attribute set must disappear too
    custom_objects(testbed).delete_namespaced_custom_object(
        DRIVER, "v1alpha1", k8s_namespace, "sriovresourcepolicies", "all"
    )
    wait_published(testbed, lambda p: set(p) == rail_a_names, "only rail-a advertised")
    custom_objects(testbed).delete_namespaced_custom_object(
        DRIVER, "v1alpha1", k8s_namespace, "deviceattributes", "rail-a"
    )
    # the selector still matches nothing-but-valid: attributes are cleared, devices stay
    wait_published(
        testbed,
        lambda p: set(p) == rail_a_names and not any(f"{DRIVER}/netAttachDefName" in a for a in p.values()),
        "rail-a attribute cleared",
    )

    # restored, and recreated after someone deletes the slices (as kubelet does on restart)
    put_policy(testbed, k8s_namespace, "all", {"configs": [{}]})
    wait_published(testbed, lambda p: set(p) == vf_names(fake_node), "every VF advertised again")
    for s in node_slices(testbed):
        custom_objects(testbed).delete_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", s["metadata"]["name"]
        )
    wait_published(testbed, lambda p: set(p) == vf_names(fake_node), "slices recreated after deletion")


def test_node_label_changes_reevaluate_node_selector(agent, testbed, k8s_namespace, fake_node) -> None:
    core = client.CoreV1Api(testbed.api_client)
    label = f"sriov-test-{secrets.token_hex(3)}"
    agent.start()
    put_policy(
        testbed,
        k8s_namespace,
        "labelled",
        {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": label, "operator": "In", "values": ["on"]}]}
                ]
            },
            "configs": [{}],
        },
    )
    wait_published(testbed, lambda p: p == {}, "nothing advertised before labelling")
    core.patch_node(testbed.node_name, {"metadata": {"labels": {label: "on"}}})
    try:
        wait_published(testbed, lambda p: set(p) == vf_names(fake_node), "VFs advertised after labelling")
    finally:
        # (the client drops None values, so a merge patch cannot delete the label)
        core.patch_node(testbed.node_name, [{"op": "remove", "path": f"/metadata/labels/{label}"}])
    wait_published(testbed, lambda p: p == {}, "VFs withdrawn after unlabelling")


# -- claims allocated by the real scheduler -------------------------------------------------------


@pytest.fixture
def device_class(testbed) -> Iterator[str]:
    name = f"sriov-test-{secrets.token_hex(3)}"
    testbed.apply(
        [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
            }
        ]
    )
    yield name
    custom_objects(testbed).delete_cluster_custom_object("resource.k8s.io", "v1", "deviceclasses", name)


def cdi_spec(dirs: KubeletDirs, uid: str) -> Any:
    return json.loads((dirs.cdi / f"{DRIVER}-vf_{uid}.json").read_text())


def test_prepare_unprepare_round_trip_restart_and_bad_claim(
    agent, testbed, k8s_namespace, fake_node, device_class, fake_kubelet_factory
) -> None:
    agent.start()
    put_policy(testbed, k8s_namespace, "all", {"configs": [{}]})
    wait_published(testbed, lambda p: set(p) == vf_names(fake_node), "every VF advertised")
    kubelet = fake_kubelet_factory(agent.dirs.registry, timeout=30)
    kubelet.register()

    c1 = allocated_claim(testbed, k8s_namespace, device_class, "c1", count=2)
    c2 = allocated_claim(testbed, k8s_namespace, device_class, "c2")
    bad = (k8s_namespace, "no-such-claim", "00000000-0000-0000-0000-000000000000")
    resp = kubelet.prepare([claim_ref(c1), bad, claim_ref(c2)])
    assert set(resp) == {c1["metadata"]["uid"], bad[2], c2["metadata"]["uid"]}
    assert resp[bad[2]].error.startswith("ClaimNotFound:")
    for claim in (c1, c2):
        entry = resp[claim["metadata"]["uid"]]
        assert entry.error == "", entry.error
        results = claim["status"]["allocation"]["devices"]["results"]
        assert sorted(d.device_name for d in entry.devices) == sorted(r["device"] for r in results)
        pod_uid = claim["status"]["reservedFor"][0]["uid"]
        for d in entry.devices:
            assert list(d.request_names) == ["vf"] and d.pool_name == testbed.node_name
            assert list(d.cdi_device_ids) == [
                f"{DRIVER}/vf={claim['metadata']['uid']}-{d.device_name}",
                f"{DRIVER}/vf={pod_uid}",
            ]
        spec = cdi_spec(agent.dirs, claim["metadata"]["uid"])
        assert spec["kind"] == f"{DRIVER}/vf" and len(spec["devices"]) == len(results)
        pod_spec = cdi_spec(agent.dirs, pod_uid)
        pcis = pod_spec["devices"][0]["containerEdits"]["env"][0].split("=", 1)[1].split(",")
        assert len(pcis) == len(results)
    checkpoint = json.loads(agent.checkpoint.read_text())
    assert set(checkpoint["data"]["claims"]) == {c1["metadata"]["uid"], c2["metadata"]["uid"]}

    # restart with prepared claims; the tmpfs CDI dir lost a spec meanwhile
    agent.stop()
    (agent.dirs.cdi / f"{DRIVER}-vf_{c1['metadata']['uid']}.json").unlink()
    agent.start()
    kubelet = fake_kubelet_factory(agent.dirs.registry, timeout=30)
    kubelet.register()
    again = kubelet.prepare([claim_ref(c1)], version="v1beta1")
    assert [d.device_name for d in again[c1["metadata"]["uid"]].devices] == [
        d.device_name for d in resp[c1["metadata"]["uid"]].devices
    ]
    assert cdi_spec(agent.dirs, c1["metadata"]["uid"])["devices"]

    un = kubelet.unprepare([claim_ref(c1), bad, claim_ref(c2)])
    assert {k: v.error for k, v in un.items()} == {
        c1["metadata"]["uid"]: "",
        bad[2]: "",
        c2["metadata"]["uid"]: "",
    }
    assert sorted(p.name for p in agent.dirs.cdi.iterdir()) == []
    assert json.loads(agent.checkpoint.read_text())["data"]["claims"] == {}


def test_a_checkpoint_of_an_unknown_version_stops_start_up_and_deletes_nothing(agent) -> None:
    """A newer build wrote it: starting without it would forget that build's claims."""
    agent.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    agent.checkpoint.write_bytes(b'{"version":9,"checksum":"00","data":{"claims":{}}}')
    before = agent.checkpoint.read_bytes()
    proc = agent.start()
    assert proc.wait(60) == 2
    out = agent.output()
    assert "UnknownCheckpointVersion" in out and "Traceback" not in out
    assert agent.checkpoint.read_bytes() == before
    assert not (agent.dirs.registry / f"{DRIVER}-reg.sock").exists()


def test_a_corrupt_checkpoint_is_moved_aside_and_the_driver_starts(agent, fake_kubelet_factory) -> None:
    agent.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    agent.checkpoint.write_bytes(b'{"version":1,"checksum":"00","data":{"claims":{}}}')
    before = agent.checkpoint.read_bytes()
    agent.start()
    fake_kubelet_factory(agent.dirs.registry, timeout=30).register()
    (moved,) = agent.checkpoint.parent.glob("checkpoint.json.damaged-*")
    assert moved.read_bytes() == before  # evidence kept, never deleted
    assert json.loads(agent.checkpoint.read_text())["data"]["claims"] == {}
    out = agent.output()
    assert "CheckpointRecovered" in out and "Traceback" not in out


def test_pf_link_down_taints_its_vfs_and_streams_unhealthy_until_it_returns(
    agent, testbed, k8s_namespace, fake_node
) -> None:
    from sriov_dra.core.devicehealth import UNHEALTHY_TAINT_KEY  # noqa: PLC0415
    from sriov_dra.kubeletplugin.gen import dra_health_v1alpha1_pb2 as pb  # noqa: PLC0415

    def taints() -> dict[str, str]:
        return {
            d["name"]: t["value"]
            for s in node_slices(testbed)
            for d in s["spec"].get("devices") or []
            for t in d.get("taints") or []
            if t["key"] == UNHEALTHY_TAINT_KEY and t["effect"] == "NoSchedule" and t.get("timeAdded")
        }

    agent.start()
    put_policy(testbed, k8s_namespace, "all", {"configs": [{}]})
    wait_published(testbed, lambda p: set(p) == vf_names(fake_node), "every VF advertised")
    generation = {s["spec"]["pool"]["generation"] for s in node_slices(testbed)}
    pf = fake_node.pfs[0]
    rail = {vf.pci.replace(":", "-").replace(".", "-") for vf in pf.vfs}
    with watch_resources(agent.dirs.plugins / DRIVER / "dra.sock", timeout=60) as stream:

        def unhealthy() -> set[str]:
            message = next(stream)
            assert {d.device.pool_name for d in message.devices} == {testbed.node_name}
            assert {d.device.device_name for d in message.devices} == vf_names(fake_node)
            return {d.device.device_name for d in message.devices if d.health == pb.UNHEALTHY}

        assert unhealthy() == set()
        fake_node.set_pf_link(pf.netdev, up=False)
        try:
            assert unhealthy() == rail
            wait_for(lambda: taints() == dict.fromkeys(rail, "PFLinkDown"), 15, what="the PF's VFs tainted")
            assert {s["spec"]["pool"]["generation"] for s in node_slices(testbed)} == generation
        finally:
            fake_node.set_pf_link(pf.netdev, up=True)
        assert unhealthy() == set()
        wait_for(lambda: taints() == {}, 15, what="the taints removed")
    assert "PFLinkDown: PF" in agent.output() and "DeviceRecovered: VF" in agent.output()
