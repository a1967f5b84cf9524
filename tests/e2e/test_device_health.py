"""Device health on the real kubelet v1.36.3 and API server (issue 35 item 1): a PF's link goes down
under a running Pod with a claim. The kubelet shows the Pod's VF Unhealthy in
``allocatedResourcesStatus`` (KEP-4680, fed by the driver's resource-health stream), the slice
taints every VF of that PF NoSchedule (KEP-5055), a new claim gets none of them (the policy offers
only that PF, so the new Pod stays unschedulable), and the link coming back clears both and lets
the waiting Pod start. A VF that vanishes from sysfs is tainted too and cleared when it returns.

The times from link down to the taint and to the Pod status are printed (target <= 10 s each).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from typing import Any

import pytest

from sriov_dra.core.devicehealth import UNHEALTHY_TAINT_KEY
from sriov_dra.model import DRIVER_NAME
from testbed.claims import RESOURCE_API
from testbed.scenario import applied, start_pod, stop_pod
from testbed.stack import Stack
from testbed.waiting import wait_for
from testbed.workloads import one_network_workload

pytestmark = [pytest.mark.integration, pytest.mark.netns]

TARGET_SECONDS = 10.0


def _taints(stack: Stack) -> dict[str, str]:
    """Device name -> the value of our unhealthy taint, for every tainted device of the node."""
    return {
        d["name"]: t.get("value", "")
        for s in stack.cluster.slices(stack.node_name, DRIVER_NAME)
        for d in s["spec"].get("devices") or []
        for t in d.get("taints") or []
        if t["key"] == UNHEALTHY_TAINT_KEY and t["effect"] == "NoSchedule"
    }


def _generations(stack: Stack) -> set[int]:
    return {int(s["spec"]["pool"]["generation"]) for s in stack.cluster.slices(stack.node_name, DRIVER_NAME)}


def _device_health(stack: Stack, pod: Mapping[str, Any]) -> set[str]:
    """The health values the kubelet reports for the Pod's claimed devices."""
    live = stack.cluster.read_pod(pod["metadata"]["namespace"], pod["metadata"]["name"]) or {}
    return {
        r.get("health", "")
        for c in (live.get("status") or {}).get("containerStatuses") or []
        for s in c.get("allocatedResourcesStatus") or []
        for r in s.get("resources") or []
    }


def _allocated_device(stack: Stack, pod: Mapping[str, Any]) -> str:
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    claims = stack.cluster.list_objects(*RESOURCE_API, "resourceclaims", namespace=namespace)
    (claim,) = [
        c for c in claims if any(o["name"] == name for o in c["metadata"].get("ownerReferences") or [])
    ]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    return str(result["device"])


def _unschedulable(stack: Stack, pod: Mapping[str, Any]) -> bool:
    live = stack.cluster.read_pod(pod["metadata"]["namespace"], pod["metadata"]["name"]) or {}
    return any(
        c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
        for c in (live.get("status") or {}).get("conditions") or []
    )


def test_pf_link_down_marks_the_pods_vf_unhealthy_and_taints_it_until_the_link_returns(
    thick_stack: Stack,
) -> None:
    stack = thick_stack
    node = stack.fake_node
    workload = one_network_workload(node, stack.cni.whereabouts_ipam())
    waiting = copy.deepcopy(workload.pod)
    waiting["metadata"]["name"] = "health-waiting"
    waiting["spec"]["terminationGracePeriodSeconds"] = 1
    with applied(stack, workload) as sources:
        run = start_pod(stack, workload, workload.pod, sources)
        published = _published_pcis(stack)
        pf = node.pf_of(published[_allocated_device(stack, run.pod)])
        rail_devices = {d for d, pci in published.items() if any(v.pci == pci for v in pf.vfs)}
        try:
            assert _taints(stack) == {}
            assert wait_for(
                lambda: _device_health(stack, run.pod) == {"Healthy"}, 30, what="Healthy reported"
            )
            generations = _generations(stack)

            down = time.monotonic()
            node.set_pf_link(pf.netdev, up=False)
            wait_for(
                lambda: set(_taints(stack)) == rail_devices, 30, what="taints on the PF's VFs", interval=0.1
            )
            to_taint = time.monotonic() - down
            wait_for(
                lambda: _device_health(stack, run.pod) == {"Unhealthy"}, 60, what="Unhealthy", interval=0.1
            )
            to_status = time.monotonic() - down
            print(f"\nlink down -> taint {to_taint:.2f} s, -> Pod status Unhealthy {to_status:.2f} s")
            assert set(_taints(stack).values()) == {"PFLinkDown"}
            # a change of taints alone is no new pool generation (KEP-5055)
            assert _generations(stack) == generations

            # every VF the policy offers is tainted: a new claim is not given one
            stack.cluster.create_pod(waiting)
            wait_for(
                lambda: _unschedulable(stack, waiting), 60, what="the new Pod unschedulable", interval=0.2
            )

            up = time.monotonic()
            node.set_pf_link(pf.netdev, up=True)
            wait_for(lambda: _taints(stack) == {}, 30, what="taints removed", interval=0.1)
            to_clear = time.monotonic() - up
            wait_for(
                lambda: _device_health(stack, run.pod) == {"Healthy"}, 60, what="Healthy again", interval=0.1
            )
            print(f"link up -> taint removed {to_clear:.2f} s, -> Healthy {time.monotonic() - up:.2f} s")
            stack.cluster.wait_running(waiting["metadata"]["namespace"], waiting["metadata"]["name"])
            stop_pod(stack, waiting)

            # a VF that vanishes from sysfs is tainted VFMissing, and untainted when it returns
            spare_device, spare = next(
                (d, pci)
                for d, pci in published.items()
                if d in rail_devices and d != _allocated_device(stack, run.pod)
            )
            node.remove_vf(spare)
            try:
                wait_for(lambda: _taints(stack) == {spare_device: "VFMissing"}, 30, what="VFMissing taint")
            finally:
                node.restore_vf(spare)
            wait_for(lambda: _taints(stack) == {}, 30, what="VFMissing taint removed")
            assert to_taint <= TARGET_SECONDS and to_status <= TARGET_SECONDS, (to_taint, to_status)
        finally:
            node.set_pf_link(pf.netdev, up=True)
            stop_pod(stack, waiting)
            stop_pod(stack, run.pod)


def _published_pcis(stack: Stack) -> dict[str, str]:
    """Device name -> PCI address of the node's published devices."""
    return {
        name: str((attributes.get(f"{DRIVER_NAME}/pciAddress") or {}).get("string"))
        for name, attributes in stack.host_driver.published().items()
    }
