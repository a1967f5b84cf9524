"""ResourceSlice building and publishing: limits, chunking, generation bumps, republish."""

import copy
from dataclasses import replace
from typing import Any

from sriov_dra.advertise.inventory import AdvertisedDevice
from sriov_dra.advertise.slices import MAX_DEVICES_WITH_TAINTS, SlicePublisher, desired_slices, slice_name
from sriov_dra.core.devicehealth import UNHEALTHY_TAINT_KEY, Verdict
from sriov_dra.model import TypedAttribute, VirtualFunction


def dev(i: int, extra: int = 0, long_value: bool = False) -> AdvertisedDevice:
    name = f"0000-17-{i // 8:02x}-{i % 8}"
    attrs: dict[str, TypedAttribute] = {"sriovnetwork.k8snetworkplumbingwg.io/vfID": {"int": i}}
    attrs.update({f"example.com/k{j}": {"string": "v"} for j in range(extra)})
    if long_value:
        attrs["example.com/long"] = {"string": "x" * 65}
    return AdvertisedDevice(VirtualFunction(name, name, "pf", "ens1f0", i), attrs)


def test_chunks_of_128_owned_by_node() -> None:
    out = desired_slices("node-a", "uid-n", [dev(i) for i in range(130)], 3)
    assert [len(s["spec"]["devices"]) for s in out.slices] == [128, 2]
    for s in out.slices:
        assert s["spec"]["pool"] == {"name": "node-a", "generation": 3, "resourceSliceCount": 2}
        assert s["spec"]["nodeName"] == "node-a"
        assert s["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "uid-n", "controller": True}
        ]


def test_no_devices_is_one_empty_slice() -> None:
    (s,) = desired_slices("node-a", "u", [], 1).slices
    assert s["spec"]["devices"] == []


def test_device_over_limits_is_rejected_whole_never_trimmed() -> None:
    ok, over, exact, long_ = dev(0, extra=30), dev(1, extra=32), dev(2, extra=31), dev(3, long_value=True)
    out = desired_slices("node-a", "u", [ok, over, exact, long_], 1)
    published = {d["name"]: d for d in out.slices[0]["spec"]["devices"]}
    assert set(published) == {ok.vf.name, exact.vf.name}
    assert len(published[exact.vf.name]["attributes"]) == 32
    assert out.rejected[over.vf.name].startswith("TooManyDeviceAttributes:")
    assert out.rejected[long_.vf.name].startswith("DeviceAttributeTooLong:")


class FakeSlices:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.writes = 0
        self.replaced: list[str] = []

    def list(self):
        return copy.deepcopy(list(self.objects.values()))

    def create(self, body):
        self.writes += 1
        self.objects[body["metadata"]["name"]] = copy.deepcopy(dict(body))

    def replace(self, name, body):
        self.writes += 1
        self.replaced.append(name)
        self.objects[name] = copy.deepcopy(dict(body))

    def delete(self, name):
        self.writes += 1
        del self.objects[name]


def test_publisher_bumps_generation_only_on_change_and_recreates_deleted() -> None:
    api = FakeSlices()
    pub = SlicePublisher(api, "node-a", "u")
    pub.publish([dev(0)])
    (s,) = api.objects.values()
    assert s["spec"]["pool"]["generation"] == 1
    writes = api.writes
    pub.publish([dev(0)])
    assert api.writes == writes  # no change, no write
    pub.publish([dev(0), dev(1)])
    assert next(iter(api.objects.values()))["spec"]["pool"]["generation"] == 2
    pub.publish([dev(i) for i in range(130)])
    assert len(api.objects) == 2
    pub.publish([dev(0)])
    assert len(api.objects) == 1
    api.objects.clear()  # kubelet wiped the node's slices
    pub.publish([dev(0)])
    assert len(api.objects) == 1


def test_device_with_an_invalid_attribute_name_is_rejected_not_the_whole_slice() -> None:
    good = dev(0)
    bad_names = ["Example.com/k", "example.com/has-dash", "a/b/c", "example.com/" + "x" * 33, "/k"]
    bad = [AdvertisedDevice(dev(i + 1).vf, {k: {"string": "v"}}) for i, k in enumerate(bad_names)]
    ok_plain = AdvertisedDevice(dev(9).vf, {"plainName_1": {"int": 1}})
    out = desired_slices("node-a", "u", [good, *bad, ok_plain], 1)
    assert [d["name"] for d in out.slices[0]["spec"]["devices"]] == [good.vf.name, ok_plain.vf.name]
    assert all(out.rejected[d.vf.name].startswith("InvalidAttributeName:") for d in bad)


def sick(i: int, reason: str = "PFLinkDown") -> AdvertisedDevice:
    return replace(dev(i), health=Verdict(reason, f"{reason}: device {i}"))


def test_an_unhealthy_device_carries_the_no_schedule_taint() -> None:
    (s,) = desired_slices("node-a", "u", [dev(0), sick(1)], 1).slices
    devices = {d["name"]: d for d in s["spec"]["devices"]}
    assert "taints" not in devices[dev(0).vf.name]
    assert devices[dev(1).vf.name]["taints"] == [
        {"key": UNHEALTHY_TAINT_KEY, "value": "PFLinkDown", "effect": "NoSchedule"}
    ]


def test_a_slice_with_a_tainted_device_holds_at_most_64_devices() -> None:
    untainted = desired_slices("node-a", "u", [dev(i) for i in range(100)], 1).slices
    assert [len(s["spec"]["devices"]) for s in untainted] == [100]
    tainted = desired_slices("node-a", "u", [sick(0), *(dev(i) for i in range(1, 100))], 1).slices
    assert [len(s["spec"]["devices"]) for s in tainted] == [MAX_DEVICES_WITH_TAINTS, 36]
    late = desired_slices("node-a", "u", [*(dev(i) for i in range(99)), sick(99)], 1).slices
    assert [len(s["spec"]["devices"]) for s in late] == [99, 1]


def test_a_taint_change_rewrites_only_its_slice_keeps_the_generation_and_time_added() -> None:
    api = FakeSlices()
    pub = SlicePublisher(api, "node-a", "u")
    devices = [dev(i) for i in range(130)]
    pub.publish(devices)
    assert {s["spec"]["pool"]["generation"] for s in api.objects.values()} == {1}
    replaced = api.replaced

    pub.publish([*devices[:129], sick(129)])
    assert replaced == [slice_name("node-a", 1)]
    assert {s["spec"]["pool"]["generation"] for s in api.objects.values()} == {1}
    # the API server stamps timeAdded; republishing the same taint neither writes nor loses it
    (taint,) = api.objects[slice_name("node-a", 1)]["spec"]["devices"][-1]["taints"]
    taint["timeAdded"] = "2026-01-01T00:00:00Z"
    pub.publish([*devices[:129], sick(129)])
    assert replaced == [slice_name("node-a", 1)]
    pub.publish([*devices[:129], sick(129, "VFMissing")])
    (taint,) = api.objects[slice_name("node-a", 1)]["spec"]["devices"][-1]["taints"]
    assert taint == {"key": UNHEALTHY_TAINT_KEY, "value": "VFMissing", "effect": "NoSchedule"}

    pub.publish(devices)  # recovered
    assert replaced[-1] == slice_name("node-a", 1) and len(replaced) == 3
    assert "taints" not in api.objects[slice_name("node-a", 1)]["spec"]["devices"][-1]
    assert {s["spec"]["pool"]["generation"] for s in api.objects.values()} == {1}


def test_a_taint_that_moves_devices_between_slices_is_a_new_generation() -> None:
    api = FakeSlices()
    pub = SlicePublisher(api, "node-a", "u")
    pub.publish([dev(i) for i in range(100)])
    pub.publish([sick(0), *(dev(i) for i in range(1, 100))])
    assert len(api.objects) == 2
    assert {s["spec"]["pool"]["generation"] for s in api.objects.values()} == {2}
