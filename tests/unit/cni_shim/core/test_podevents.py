"""The Pod Events Multus records, as pure data: messages, the Pod reference, the Event object."""

from __future__ import annotations

import pytest

from cni_shim.core import podevents

POD = {"metadata": {"namespace": "ns1", "name": "pod1", "uid": "uid-1", "resourceVersion": "7"}}


def test_added_interface_message_is_multus_text_with_every_address():
    result = {
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "net1"}],
        "ips": [{"address": "10.1.1.2/24"}, {"address": "fd00::2/64"}],
    }
    assert (
        podevents.added_interface_message("net1", result, "ns/net")
        == "Add net1 [10.1.1.2/24 fd00::2/64] from ns/net"
    )
    assert podevents.added_interface_message("net1", result, "") == "Add net1 [10.1.1.2/24 fd00::2/64]"


@pytest.mark.parametrize(
    ("result", "message"),
    [
        # Go's `res.Interfaces != nil || res.IPs != nil`: a 1.x result naming the key counts.
        ({"cniVersion": "1.0.0", "interfaces": []}, "Add eth0 [] from n"),
        ({"cniVersion": "1.1.0", "ips": [{"address": "10.0.0.2/24"}]}, "Add eth0 [10.0.0.2/24] from n"),
        ({"cniVersion": "1.0.0"}, None),
        ({"cniVersion": "1.0.0", "interfaces": None}, None),
        # Older results are converted first; empty lists convert to nil.
        ({"cniVersion": "0.4.0", "interfaces": [], "ips": []}, None),
        (
            {"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "10.0.0.3/24"}]},
            "Add eth0 [10.0.0.3/24] from n",
        ),
        ({"cniVersion": "0.2.0", "ip4": {"ip": "10.0.0.4/24"}}, "Add eth0 [10.0.0.4/24] from n"),
        ({"cniVersion": "0.2.0"}, None),
        # A result that does not convert gets no Event (Multus logs "error converting result").
        ({"cniVersion": "1.0.0", "ips": [{"address": "nope"}]}, None),
        ({"cniVersion": "9.9.9", "ips": []}, None),
    ],
)
def test_added_interface_only_for_results_with_interfaces_or_ips(result, message):
    assert podevents.added_interface_message("eth0", result, "n") == message


def test_no_network_found_message_names_the_live_or_the_cached_not_found():
    assert podevents.no_network_found_message("ns1", "net-x", cached=False) == (
        "cannot find a network-attachment-definition (net-x) in namespace (ns1): "
        'network-attachment-definitions.k8s.cni.cncf.io "net-x" not found'
    )
    assert podevents.no_network_found_message("ns1", "net-x", cached=True).endswith(
        ': networkattachmentdefinition.k8s.cni.cncf.io "net-x" not found'
    )


def test_pod_reference_is_what_get_reference_gives():
    assert podevents.pod_reference(POD) == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": "ns1",
        "name": "pod1",
        "uid": "uid-1",
        "resourceVersion": "7",
    }
    assert podevents.pod_reference({}) == {"kind": "Pod", "apiVersion": "v1"}


def test_event_is_the_recorders_object():
    ref = podevents.pod_reference(POD)
    obj = podevents.event(
        ref, podevents.NORMAL, podevents.ADDED_INTERFACE, "Add eth0 [] from n", 1700000000.5
    )
    assert obj == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"pod1.{1700000000500000000:x}", "namespace": "ns1"},
        "involvedObject": ref,
        "reason": "AddedInterface",
        "message": "Add eth0 [] from n",
        "source": {"component": "multus"},
        "firstTimestamp": "2023-11-14T22:13:20Z",
        "lastTimestamp": "2023-11-14T22:13:20Z",
        "count": 1,
        "type": "Normal",
        "reportingComponent": "multus",
        "reportingInstance": "",
    }
    assert podevents.summary(obj) == "Normal AddedInterface Add eth0 [] from n"
    # An object without a namespace goes to "default", as the recorder does.
    assert (
        podevents.event({"name": "x"}, podevents.WARNING, "R", "m", 0.0)["metadata"]["namespace"] == "default"
    )


def test_combine_folds_one_adds_events_per_type_reason_and_pod_keeping_each_text():
    ref = podevents.pod_reference(POD)
    other = podevents.pod_reference({"metadata": {"namespace": "ns1", "name": "pod2"}})
    a = podevents.event(
        ref, podevents.NORMAL, podevents.ADDED_INTERFACE, "Add eth0 [10.0.0.2/24] from podnet", 1.0
    )
    b = podevents.event(
        ref, podevents.NORMAL, podevents.ADDED_INTERFACE, "Add net1 [10.1.0.2/24] from ns1/a", 2.0
    )
    warn = podevents.event(ref, podevents.WARNING, podevents.NO_NETWORK_FOUND, "cannot find", 3.0)
    elsewhere = podevents.event(other, podevents.NORMAL, podevents.ADDED_INTERFACE, "Add eth0 []", 4.0)
    combined = podevents.combine([a, warn, b, elsewhere])
    assert [podevents.summary(e) for e in combined] == [
        "Normal AddedInterface Add eth0 [10.0.0.2/24] from podnet; Add net1 [10.1.0.2/24] from ns1/a",
        "Warning NoNetworkFound cannot find",
        "Normal AddedInterface Add eth0 []",
    ]
    assert combined[0]["metadata"] == a["metadata"]  # the first one's name and timestamps
    assert a["message"] == "Add eth0 [10.0.0.2/24] from podnet"  # the inputs are left as they were
    assert podevents.combine([]) == []
