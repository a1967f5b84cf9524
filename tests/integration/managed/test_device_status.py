"""ResourceClaim status.devices as a DRA user sees it: the real driver process, the real API
server's validation and its per-driver status authorization (KEP-4817), under the shipped RBAC.

The shipped role grants `associated-node:patch` on `resourceclaims/driver`, which the API server
only honours for a ServiceAccount token bound to a Pod on the claim's node; the test bed's
certificate identities carry no node, so one test runs the driver with a real bound token and
another shows that a refused status write still prepares."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from sriov_contract.keys import NETWORK_STATUS_ANNOTATION
from sriov_dra.kube.resources import KubeClaims
from testbed.apiobjects import present
from testbed.audit import AuditEvent
from testbed.bed import TestBed
from testbed.claims import (
    RESOURCE_API,
    allocated_claim,
    create_pod,
    custom_objects,
    get_claim,
    wait_reserved,
)
from testbed.deployment import DRIVER_NAMESPACE, DRIVER_SA, service_account_user
from testbed.managed_driver import binding_of, put_nad, shadows, sriov_config, start_agent
from testbed.node_agent import DRIVER
from testbed.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.netns, pytest.mark.usefixtures("released_workloads")]

GPU_DRIVER = "gpu.nvidia.com"


def gpu_and_vf_claim(testbed, ns: str, classes, name: str) -> dict[str, Any]:
    """A claim with another driver's device (a GPU) and one of ours, allocated and reserved."""
    requests = [
        {"name": "gpu", "exactly": {"deviceClassName": classes.gpu}},
        {"name": "vf", "exactly": {"deviceClassName": classes.name_only}},
    ]
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": requests}},
    }
    custom_objects(testbed).create_namespaced_custom_object(*RESOURCE_API, ns, "resourceclaims", body)
    create_pod(testbed, ns, f"pod-{name}", [{"name": "devs", "resourceClaimName": name}])
    return wait_reserved(testbed, ns, name, f"pod-{name}")


def ours(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in (claim.get("status") or {}).get("devices") or [] if d["driver"] == DRIVER]


def status_writes(testbed: TestBed, since: int) -> list[AuditEvent]:
    user, _groups = service_account_user(DRIVER_NAMESPACE, DRIVER_SA)
    return testbed.audit.events(
        since=since, user=user, verb="patch", resource="resourceclaims", subresource="status"
    )


def test_status_devices_reports_our_bindings_beside_other_drivers(
    managed_agent, testbed, k8s_namespace, policies, classes, gpu_slices, node_bound_kubeconfig
) -> None:
    ns, node = k8s_namespace, managed_agent.fake_node
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    gpu_slices(testbed.node_name, node.gpus)
    managed_agent.env["REPAIR_INTERVAL"] = "1"
    managed_agent.env["KUBECONFIG"] = str(node_bound_kubeconfig)
    start_agent(managed_agent, policies)
    claim = gpu_and_vf_claim(testbed, ns, classes, "pair")
    results = {r["request"]: r for r in claim["status"]["allocation"]["devices"]["results"]}
    gpu, vf = results["gpu"], results["vf"]

    # the GPU driver reports first; our entry must land beside it, never replace it
    foreign = {
        "driver": GPU_DRIVER,
        "pool": gpu["pool"],
        "device": gpu["device"],
        "data": {"uuid": "GPU-0000"},
        "conditions": [
            {
                "type": "Healthy",
                "status": "True",
                "reason": "Probed",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    KubeClaims(testbed.api_client).patch_claim_status(
        ns, "pair", [{"op": "add", "path": "/status/devices", "value": [foreign]}]
    )

    mark = testbed.audit.mark()
    out = managed_agent.prepare(claim)
    assert out.error == "", out.error
    (shadow,) = shadows(testbed, ns)
    binding = binding_of(shadow)
    claim = get_claim(testbed, ns, "pair")
    devices = claim["status"]["devices"]
    assert devices[0] == foreign and len(devices) == 2
    entry = devices[1]
    assert (entry["driver"], entry["pool"], entry["device"]) == (DRIVER, vf["pool"], vf["device"])
    assert entry["data"] == {
        "attachmentID": binding.attachment_id,
        "interface": "dra0",
        "pciAddress": binding.pci_address,
        "shadow": {"namespace": ns, "name": shadow["metadata"]["name"], "uid": shadow["metadata"]["uid"]},
        "source": {"namespace": ns, "name": "rail-a-net"},
    }
    (ready,) = entry["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "ShadowReady")
    assert ready.get("observedGeneration", 0) == claim["metadata"].get("generation", 0)
    assert [e.code for e in status_writes(testbed, mark)] == [200]

    # kubelet repeats the call: nothing changed, so nothing is written, and the repair pass the new
    # shadow woke (which read the claim before that write) lets the fresh write settle
    mark = testbed.audit.mark()
    assert managed_agent.prepare(claim).error == ""
    assert status_writes(testbed, mark) == []

    # the CNI shim's network-status names the shadow: a repair pass copies it into networkData
    status = [
        {"name": "cbr0", "interface": "eth0", "ips": ["10.88.0.9"], "default": True, "dns": {}},
        {
            "name": f"{ns}/{shadow['metadata']['name']}",
            "interface": "dra0",
            "ips": ["192.0.2.7"],
            "mac": "02:00:c0:00:02:07",
            "dns": {},
        },
    ]
    client.CoreV1Api(testbed.api_client).patch_namespaced_pod(
        "pod-pair", ns, {"metadata": {"annotations": {NETWORK_STATUS_ANNOTATION: json.dumps(status)}}}
    )
    network = wait_for(
        lambda: (ours(get_claim(testbed, ns, "pair")) or [{}])[0].get("networkData"),
        30,
        what="the repair worker to report the interface's network data",
    )
    assert network == {
        "interfaceName": "dra0",
        "ips": ["192.0.2.7/32"],
        "hardwareAddress": "02:00:c0:00:02:07",
    }

    assert managed_agent.unprepare(claim) == ""
    assert get_claim(testbed, ns, "pair")["status"]["devices"] == [foreign]


def test_a_refused_status_write_still_prepares_and_is_reported(
    managed_agent, testbed, k8s_namespace, policies, classes
) -> None:
    """The bed's certificate identity is the driver's ServiceAccount without a node: under the
    shipped RBAC the API server refuses its status.devices write (it would need arbitrary-node),
    as a field error (422) rather than a 403."""
    ns = k8s_namespace
    put_nad(testbed, ns, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    start_agent(managed_agent, policies)
    claim = allocated_claim(testbed, ns, classes.name_only, "c")

    mark = testbed.audit.mark()
    out = managed_agent.prepare(claim)
    assert out.error == "", out.error
    assert (
        managed_agent.records()[claim["metadata"]["uid"]]["devices"][0]["managedBinding"]["phase"] == "Ready"
    )
    assert [e.code for e in status_writes(testbed, mark)] == [422]
    assert ours(get_claim(testbed, ns, "c")) == []
    # The agent's Event sender writes it in the background: it may still be on its way.
    (event,) = wait_for(
        lambda: (
            client.CoreV1Api(testbed.api_client)
            .list_namespaced_event(ns, field_selector="involvedObject.name=c,reason=DeviceStatusForbidden")
            .items
        ),
        30,
        what="the DeviceStatusForbidden Event",
    )
    message = present(event.message, "message of the DeviceStatusForbidden Event")
    assert event.type == "Warning" and message.startswith("device-status of claim")
    assert "associated-node:patch" in message

    assert managed_agent.unprepare(claim) == ""
    assert shadows(testbed, ns) == [] and managed_agent.records() == {}
