"""The kubelet's device-plugin checkpoint as the legacy resourceName path's allocation."""

from __future__ import annotations

import json

import pytest

from cni_shim.core.kubeletcheckpoint import allocated


def _checkpoint(*entries):
    return json.dumps(
        {"Data": {"PodDeviceEntries": list(entries), "RegisteredDevices": {}}, "Checksum": 1}
    ).encode()


def _entry(uid, resource, ids, container="c"):
    return {
        "PodUID": uid,
        "ContainerName": container,
        "ResourceName": resource,
        "DeviceIDs": ids,
        "AllocResp": "",
    }


def test_per_numa_and_legacy_list_forms_for_every_container_of_the_pod():
    data = _checkpoint(
        _entry("u1", "vendor.com/vf", {"0": ["0000:3b:02.1"], "1": ["0000:af:02.1"]}),
        _entry("u1", "vendor.com/vf", ["0000:3b:02.2"], container="side"),
        _entry("u1", "vendor.com/other", {"0": ["0000:3b:02.3"]}),
        _entry("u2", "vendor.com/vf", {"0": ["0000:3b:02.4"]}),
    )
    assert allocated(data, "u1", "vendor.com/vf") == {"0000:3b:02.1", "0000:af:02.1", "0000:3b:02.2"}
    assert allocated(data, "u2", "vendor.com/vf") == {"0000:3b:02.4"}
    assert allocated(data, "u3", "vendor.com/vf") == frozenset()
    assert allocated(data, "u1", "") == frozenset()
    assert allocated(data, "", "vendor.com/vf") == frozenset()


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{",
        b"[]",
        b'{"Data": []}',
        b'{"Data": {"PodDeviceEntries": {}}}',
        b'{"Data": {"PodDeviceEntries": [1, {"PodUID": "u1", "ResourceName": "r", "DeviceIDs": 5}]}}',
    ],
)
def test_an_unusable_checkpoint_allocates_nothing(data):
    assert allocated(data, "u1", "r") == frozenset()
