"""sriov-operator inspect resolves each policy to its network, source NAD, objects and VFs."""

from __future__ import annotations

from typing import Any

from sriov_operator.app.inspect import as_text, inspect

OPS = "ops"
STATE = {
    "status": {
        "interfaces": [
            {
                "name": "ens1f0",
                "pciAddress": "0000:03:00.0",
                "vendor": "15b3",
                "Vfs": [{"pciAddress": "0000:03:00.2", "vfID": 0}],
            }
        ]
    }
}


class Source:
    def __init__(self, policies: list[dict[str, Any]], generated: dict[str, dict[str, Any]]) -> None:
        self.policies, self.attrs = policies, generated

    def list_policies(self, namespace: str) -> list[dict[str, Any]]:
        return self.policies

    def list_nodes(self) -> list[dict[str, Any]]:
        return [
            {"metadata": {"name": "n1", "labels": {"rail": "yes"}}},
            {"metadata": {"name": "n2", "labels": {}}},
        ]

    def list_node_states(self, namespace: str) -> dict[str, dict[str, Any]]:
        return {"n1": STATE, "n2": STATE}

    def list_generated(self, kind: str, namespace: str) -> dict[str, dict[str, Any]]:
        return self.attrs if kind == "DeviceAttributes" else {"n1": {}}


def policy(name: str, dra: Any, condition: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceName": "sriov_vfs",
        "nodeSelector": {"rail": "yes"},
        "nicSelector": {"pfNames": ["ens1f0"]},
    }
    if dra is not None:
        spec["dra"] = dra
    return {
        "metadata": {"name": name, "namespace": OPS, "uid": f"u-{name}"},
        "spec": spec,
        "status": {"conditions": [condition] if condition else []},
    }


def test_a_ready_rail_shows_its_network_nad_objects_and_vfs() -> None:
    ref = {
        "attributes": {
            "sriovnetwork.openshift.io/sriovNetworkName": {"string": "rail-a-net"},
            "sriovnetwork.openshift.io/sriovNetworkNamespace": {"string": OPS},
        }
    }
    ready = {
        "type": "DRAConfigurationReady",
        "status": "True",
        "reason": "DRAConfigurationApplied",
        "message": "ok",
    }
    broken = {
        "type": "DRAConfigurationReady",
        "status": "False",
        "reason": "SourceNADNotReady",
        "message": "NAD gone",
    }
    generated = {
        "dra-policy-u-a-attrs": {
            "spec": {
                "attributes": {
                    "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName": {"string": "rail-a-net"},
                    "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace": {"string": "ai"},
                }
            }
        }
    }
    rows = inspect(
        Source([policy("b", ref, broken), policy("a", ref, ready), policy("legacy", None)], generated),
        OPS,
        OPS,
    )
    a, b, legacy = rows
    assert a["sriovNetwork"] == "ops/rail-a-net" and a["sourceNAD"] == "ai/rail-a-net"
    assert a["deviceAttributes"] == "dra-policy-u-a-attrs" and a["nodeConfigs"] == ["n1"]
    assert a["vfs"] == {"n1": ["0000:03:00.2"]}
    assert b["deviceAttributes"] == "" and b["reason"] == "SourceNADNotReady"
    assert legacy["mode"] == "legacy" and legacy["status"] == ""
    text = as_text(rows)
    assert "ops/b (dra): False SourceNADNotReady\n  why:              NAD gone" in text
    assert "DeviceAttributes: - (none generated)" in text and "VFs on n1: 0000:03:00.2" in text
