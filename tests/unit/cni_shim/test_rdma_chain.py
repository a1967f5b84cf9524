"""The rdma plugin after sriov in a managed shadow's chain (issue 32 item 4): the guard lets it
through when it names the bound VF, the chain runs in order on ADD and in reverse on DEL, each
plugin seeing the same deviceID; an rdma entry naming another VF refuses the shadow."""

from __future__ import annotations

import json
from typing import Any

from sriov_contract import keys
from testbed.managed_shadows import POD_UID, managed_shadow, registry_annotation

NS = "ns1"
ARGS = f"K8S_POD_NAMESPACE={NS};K8S_POD_NAME=pod1;K8S_POD_UID={POD_UID}"
PCI = "0000:03:00.1"


def _chain(rdma_pci: str) -> str:
    conf = {
        "cniVersion": "1.0.0",
        "name": "rail-a",
        "plugins": [
            {
                "type": "sriov",
                "deviceID": PCI,
                "ipam": {"type": "static", "addresses": [{"address": "192.0.2.10/24"}]},
            },
            {"type": "rdma", "deviceID": rdma_pci},
        ],
    }
    return json.dumps(conf, separators=(",", ":"))


def _setup(shim: Any, rdma_pci: str) -> None:
    shadow = managed_shadow(namespace=NS, pod_name="pod1", pci=PCI, config=_chain(rdma_pci))
    annotations = {
        keys.NETWORKS_ANNOTATION: json.dumps([shadow["selection"]]),
        keys.REGISTRY_ANNOTATION: registry_annotation(POD_UID, [shadow["entry"]]),
    }
    shim.kube.add_pod(NS, "pod1", POD_UID, annotations)
    shim.kube.nads[(NS, shadow["name"])] = shadow["nad"]


def test_rdma_runs_after_sriov_with_the_same_vf_and_is_deleted_first(shim: Any) -> None:
    _setup(shim, PCI)
    assert shim.run("ADD", shim.conf(), args=ARGS).status == 0
    assert shim.executor.commands()[1:] == [("sriov", "ADD", "dra0"), ("rdma", "ADD", "dra0")]
    assert [c.stdin["deviceID"] for c in shim.executor.calls[1:]] == [PCI, PCI]
    shim.executor.calls.clear()
    assert shim.run("DEL", shim.conf(), args=ARGS).status == 0
    assert shim.executor.commands()[:2] == [("rdma", "DEL", "dra0"), ("sriov", "DEL", "dra0")]


def test_an_rdma_plugin_naming_another_vf_refuses_the_shadow(shim: Any) -> None:
    _setup(shim, "0000:03:00.2")
    out = shim.run("ADD", shim.conf(), args=ARGS)
    assert out.json["details"] == "ManagedShadowPciMismatch"
    assert shim.executor.commands() == []
