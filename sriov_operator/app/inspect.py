"""`sriov-operator inspect`: per policy, what the operator made of it (spec 14.4 asks for a way to
resolve rail mappings without reading generated objects by hand).

For each SriovNetworkNodePolicy: its DRAConfigurationReady status and reason, the SriovNetwork it
references, the source NAD its generated object carries, the generated object names, and which
VFs of which nodes it maps (computed from each node's SriovNetworkNodeState with the same
selector rules the generator uses).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from sriov_operator.core.conditions import find
from sriov_operator.core.keys import (
    DRA_READY,
    NAD_NAME_ATTRIBUTE,
    NAD_NAMESPACE_ATTRIBUTE,
    REF_NAME_KEY,
    REF_NAMESPACE_KEY,
    policy_attributes_name,
    pool_attributes_name,
)
from sriov_operator.core.plan import selects_node
from sriov_operator.core.translate import inventory, vf_set


class InspectSource(Protocol):
    def list_policies(self, namespace: str) -> list[dict[str, Any]]: ...
    def list_nodes(self) -> list[dict[str, Any]]: ...
    def list_node_states(self, namespace: str) -> dict[str, dict[str, Any]]: ...
    def list_generated(self, kind: str, namespace: str) -> dict[str, dict[str, Any]]: ...


def _string(attrs: Mapping[str, Any], key: str) -> str:
    value = attrs.get(key)
    return str(value.get("string", "")) if isinstance(value, Mapping) else ""


def inspect(source: InspectSource, namespace: str, policy_namespace: str) -> list[dict[str, Any]]:
    nodes = source.list_nodes()
    states = source.list_node_states(namespace)
    generated = source.list_generated("DeviceAttributes", policy_namespace)
    configs = source.list_generated("SriovResourcePolicy", policy_namespace)
    rows = []
    for policy in sorted(source.list_policies(namespace), key=lambda p: str(p["metadata"]["name"])):
        md, spec = policy["metadata"], policy.get("spec") or {}
        dra = spec.get("dra")
        attrs = ((dra or {}).get("attributes") or {}) if isinstance(dra, Mapping) else {}
        name = (
            policy_attributes_name(str(md.get("uid")))
            if dra is not None
            else pool_attributes_name(str(spec.get("resourceName")))
        )
        obj = generated.get(name)
        published = ((obj or {}).get("spec") or {}).get("attributes") or {}
        cond = find((policy.get("status") or {}).get("conditions") or [], DRA_READY) or {}
        mapped = {}
        for node in nodes:
            node_name = str(node["metadata"]["name"])
            if node_name in states and selects_node(spec, node["metadata"].get("labels") or {}):
                vfs = sorted(vf_set(spec, inventory(states[node_name])))
                if vfs:
                    mapped[node_name] = vfs
        reference = (
            f"{_string(attrs, REF_NAMESPACE_KEY)}/{_string(attrs, REF_NAME_KEY)}"
            if REF_NAME_KEY in attrs
            else ""
        )
        nad = (
            f"{_string(published, NAD_NAMESPACE_ATTRIBUTE)}/{_string(published, NAD_NAME_ATTRIBUTE)}"
            if NAD_NAME_ATTRIBUTE in published
            else ""
        )
        rows.append(
            {
                "policy": f"{md.get('namespace')}/{md.get('name')}",
                "mode": "legacy" if dra is None else "dra",
                "status": cond.get("status", ""),
                "reason": cond.get("reason", ""),
                "message": cond.get("message", ""),
                "sriovNetwork": reference,
                "sourceNAD": nad,
                "deviceAttributes": name if obj is not None else "",
                "nodeConfigs": sorted(n for n in mapped if n in configs),
                "vfs": mapped,
            }
        )
    return rows


def as_text(rows: list[dict[str, Any]]) -> str:
    """The rows of `inspect` for a terminal, one block per policy."""
    out = []
    for r in rows:
        out.append(f"{r['policy']} ({r['mode']}): {r['status'] or '-'} {r['reason'] or ''}".rstrip())
        if r["message"] and r["status"] != "True":
            out.append(f"  why:              {r['message']}")
        out.append(f"  SriovNetwork:     {r['sriovNetwork'] or '-'}")
        out.append(f"  source NAD:       {r['sourceNAD'] or '-'}")
        out.append(f"  DeviceAttributes: {r['deviceAttributes'] or '- (none generated)'}")
        out.append(f"  node configs:     {', '.join(r['nodeConfigs']) or '-'}")
        for node, vfs in sorted(r["vfs"].items()):
            out.append(f"  VFs on {node}: {', '.join(vfs)}")
    return "\n".join(out)
