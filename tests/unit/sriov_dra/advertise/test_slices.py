"""ResourceSlice building and publishing: limits, chunking, generation bumps, republish."""

import copy
from typing import Any

from sriov_dra.advertise.inventory import AdvertisedDevice
from sriov_dra.advertise.slices import SlicePublisher, desired_slices
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

    def list(self):
        return copy.deepcopy(list(self.objects.values()))

    def create(self, body):
        self.writes += 1
        self.objects[body["metadata"]["name"]] = copy.deepcopy(dict(body))

    def replace(self, name, body):
        self.writes += 1
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
