import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core.devicestatus import (
    DATA_LIMIT,
    MAX_IPS,
    DeviceReport,
    desired_entry,
    merge_device_status,
    network_data,
    remove_device_status,
    status_key,
)
from sriov_dra.core.errors import DriverCoreError

OURS = "sriovnetwork.k8snetworkplumbingwg.io"
GPU = "gpu.nvidia.com"
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"


def report(device="vf-1", attachment="a1", **kw):
    return DeviceReport(
        OURS, "node-0", device, {"attachmentID": attachment}, "ShadowReady", f"{device} ready", **kw
    )


def gpu_entry(device="gpu-0", share=None):
    entry = {"driver": GPU, "pool": "node-0", "device": device, "data": {"uuid": device}}
    if share:
        entry["shareID"] = share
    return entry


def test_entry_has_data_and_a_ready_condition_at_the_claims_generation():
    entry = desired_entry(report(), generation=3, now=T0)
    assert entry == {
        "driver": OURS,
        "pool": "node-0",
        "device": "vf-1",
        "data": {"attachmentID": "a1"},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "ShadowReady",
                "message": "vf-1 ready",
                "observedGeneration": 3,
                "lastTransitionTime": T0,
            }
        ],
    }


def test_a_claim_without_a_generation_gets_no_observed_generation():
    (cond,) = desired_entry(report(), generation=0, now=T0)["conditions"]
    assert "observedGeneration" not in cond


def test_entry_carries_network_data_only_when_known():
    net = {"interfaceName": "dra0", "ips": ["192.0.2.5/32"]}
    assert desired_entry(report(network=net), generation=1, now=T0)["networkData"] == net
    assert "networkData" not in desired_entry(report(network={}), generation=1, now=T0)


def test_data_over_the_api_limit_is_refused():
    big = DeviceReport(OURS, "node-0", "vf-1", {"x": "y" * DATA_LIMIT}, "ShadowReady", "m")
    with pytest.raises(DriverCoreError) as err:
        desired_entry(big, generation=1, now=T0)
    assert err.value.reason == "DeviceStatusTooLarge"


@pytest.mark.parametrize(
    ("current", "desired", "expected"),
    [
        pytest.param([], ["vf-1"], ["vf-1"], id="empty"),
        pytest.param(["gpu-0"], ["vf-1"], ["gpu-0", "vf-1"], id="appended after foreign"),
        pytest.param(["vf-1", "gpu-0"], ["vf-1"], ["vf-1", "gpu-0"], id="upserted in place"),
        pytest.param(["gpu-0"], ["vf-2", "vf-1"], ["gpu-0", "vf-2", "vf-1"], id="desired order kept"),
    ],
)
def test_merge_order(current, desired, expected):
    def entry(name):
        if name.startswith("gpu"):
            return gpu_entry(name)
        return desired_entry(report(name), generation=1, now=T0)

    merged = merge_device_status([entry(n) for n in current], [entry(n) for n in desired])
    assert [e["device"] for e in merged] == expected


def test_remerge_keeps_transition_time_and_network_data_so_nothing_changes():
    first = merge_device_status([], [desired_entry(report(), generation=1, now=T0)])
    first[0]["networkData"] = {"interfaceName": "dra0"}
    again = merge_device_status(first, [desired_entry(report(), generation=1, now=T1)])
    assert again == first


def test_newly_known_network_data_replaces_the_reported_one():
    old = desired_entry(report(network={"interfaceName": "dra0"}), generation=1, now=T0)
    net = {"interfaceName": "dra0", "ips": ["192.0.2.7/32"]}
    (entry,) = merge_device_status([old], [desired_entry(report(network=net), generation=1, now=T1)])
    assert entry == old | {"networkData": net}


def test_changed_data_is_replaced_but_an_unchanged_status_keeps_its_transition_time():
    first = merge_device_status([], [desired_entry(report(attachment="a1"), generation=1, now=T0)])
    changed = merge_device_status(first, [desired_entry(report(attachment="a2"), generation=2, now=T1)])
    (entry,) = changed
    assert entry["data"] == {"attachmentID": "a2"}
    assert entry["conditions"][0]["observedGeneration"] == 2
    assert entry["conditions"][0]["lastTransitionTime"] == T0


def test_a_status_change_moves_the_transition_time_and_other_conditions_stay():
    old = desired_entry(report(), generation=1, now=T0)
    old["conditions"][0]["status"] = "False"
    old["conditions"].append({"type": "Other", "status": "True", "lastTransitionTime": T0})
    (entry,) = merge_device_status([old], [desired_entry(report(), generation=1, now=T1)])
    assert [(c["type"], c["status"], c["lastTransitionTime"]) for c in entry["conditions"]] == [
        ("Ready", "True", T1),
        ("Other", "True", T0),
    ]


def test_share_id_makes_a_different_key():
    shared = gpu_entry("vf-1", share="s1") | {"driver": OURS}
    merged = merge_device_status([shared], [desired_entry(report(), generation=1, now=T0)])
    assert len(merged) == 2 and merged[0] == shared
    assert status_key({"driver": OURS, "pool": "p", "device": "d"}) == status_key(
        {"driver": OURS, "pool": "p", "device": "d", "shareID": None}
    )


def test_remove_takes_only_the_named_keys():
    ours = desired_entry(report(), generation=1, now=T0)
    current = [gpu_entry(), ours, gpu_entry("gpu-1")]
    assert remove_device_status(current, {status_key(ours)}) == [gpu_entry(), gpu_entry("gpu-1")]
    assert remove_device_status(current, set()) == current


# -- properties ----------------------------------------------------------------------------------

_names = st.sampled_from(["d0", "d1", "d2", "d3"])
_foreign = st.builds(
    lambda d, share, payload: gpu_entry(d, share) | {"data": {"v": payload}},
    _names,
    st.sampled_from([None, "s1"]),
    st.integers(0, 3),
)
_ours = st.builds(
    lambda d, attachment, gen, now: desired_entry(report(d, attachment), generation=gen, now=now),
    _names,
    st.sampled_from(["a", "b"]),
    st.integers(1, 3),
    st.sampled_from([T0, T1]),
)


def _unique(entries):
    seen, out = set(), []
    for e in entries:
        if status_key(e) not in seen:
            seen.add(status_key(e))
            out.append(e)
    return out


@given(st.lists(st.one_of(_foreign, _ours)).map(_unique), st.lists(_ours).map(_unique))
def test_merge_is_idempotent_keyed_and_leaves_foreign_entries_alone(current, desired):
    merged = merge_device_status(current, desired)
    assert merge_device_status(merged, desired) == merged
    keys = [status_key(e) for e in merged]
    assert len(keys) == len(set(keys))
    assert set(keys) == {status_key(e) for e in current} | {status_key(e) for e in desired}
    untouched = {status_key(d) for d in desired}
    assert [e for e in merged if status_key(e) not in untouched] == [
        e for e in current if status_key(e) not in untouched
    ]
    # removing what was merged in gives back exactly the other entries
    assert remove_device_status(merged, untouched) == [e for e in current if status_key(e) not in untouched]


# -- networkData from the network-status annotation ------------------------------------------------


def _status(*entries):
    return json.dumps(list(entries))


def test_network_data_from_the_shadows_entry():
    status = _status(
        {"name": "cbr0", "interface": "eth0", "ips": ["10.244.0.5"], "default": True},
        {
            "name": "ns/dra-sriov-abc",
            "interface": "dra0",
            "ips": ["192.0.2.5", "2001:db8::5", "192.0.2.5", "not-an-ip", "198.51.100.7/24"],
            "mac": "02:00:00:00:00:01",
        },
    )
    assert network_data(status, "ns/dra-sriov-abc") == {
        "interfaceName": "dra0",
        "ips": ["192.0.2.5/32", "2001:db8::5/128", "198.51.100.7/24"],
        "hardwareAddress": "02:00:00:00:00:01",
    }


@pytest.mark.parametrize("text", ["", "{", "{}", _status({"name": "other", "ips": ["192.0.2.1"]})])
def test_network_data_is_none_without_an_entry(text):
    assert network_data(text, "ns/dra-sriov-abc") is None


def test_network_data_keeps_at_most_the_api_limit_of_addresses():
    status = _status({"name": "n/s", "ips": [f"192.0.2.{i}" for i in range(40)]})
    assert network_data(status, "n/s") == {"ips": [f"192.0.2.{i}/32" for i in range(MAX_IPS)]}


def test_network_data_leaves_out_what_the_entry_lacks_or_garbles():
    # ADD may report an interface with no usable address; an address that is not text is skipped
    status = _status({"name": "n/s", "interface": "dra0", "ips": [7, None], "mac": ""})
    assert network_data(status, "n/s") == {"interfaceName": "dra0"}
