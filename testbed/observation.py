"""A running Pod observed from outside, as a user and the checks see it: its claim's allocation,
its shadow NADs, the links in its sandbox, and one row per interface our driver gave it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sriov_contract import keys
from sriov_dra.model import ATTR_PCI_BUS_ID, ATTR_PCIE_ROOT
from testbed.driver import DRIVER
from testbed.netlinks import ipv4_addresses, ns_links
from testbed.results import Row

if TYPE_CHECKING:
    from testbed.stack import Stack


@dataclass
class Observed:
    pod: dict[str, Any]
    claim: dict[str, Any]
    shadows: list[dict[str, Any]]
    links: dict[str, Any]
    rows: list[Row]

    @property
    def uid(self) -> str:
        return str(self.pod["metadata"]["uid"])


def allocation_results(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(claim["status"]["allocation"]["devices"]["results"])


def shadow_binding(nad: Mapping[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(nad["metadata"]["annotations"][keys.BINDING_ANNOTATION])
    return doc


def _partner(template_constraints: Sequence[Mapping[str, Any]], request: str) -> str:
    for c in template_constraints:
        if c.get("matchAttribute") == ATTR_PCIE_ROOT and request in c["requests"]:
            return next((r for r in c["requests"] if r != request), "")
    return ""


def _device_infos(pod: Mapping[str, Any]) -> dict[str, str]:
    """network-status entry name -> the RDMA device its device-info names."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(keys.NETWORK_STATUS_ANNOTATION)
    try:
        entries = json.loads(text) if text else []
    except ValueError:
        return {}
    out = {}
    for entry in entries:
        rdma = ((entry.get("device-info") or {}).get("pci") or {}).get("rdma-device")
        if rdma:
            out[str(entry.get("name"))] = str(rdma)
    return out


def observe(stack: Stack, pod: Mapping[str, Any]) -> Observed:
    namespace = pod["metadata"]["namespace"]
    live = stack.cluster.read_pod(namespace, pod["metadata"]["name"]) or {}
    stack = stack.on(live["spec"]["nodeName"])
    claim = stack.cluster.claim_of(live)
    results = allocation_results(claim)
    by_request = {r["request"]: r for r in results}
    constraints = claim["spec"]["devices"].get("constraints") or []
    shadows = stack.cluster.shadows(namespace, live["metadata"]["uid"])
    by_pci = {shadow_binding(s)["pciAddress"]: s for s in shadows}
    links = ns_links(stack.kubelet.netns_path(live["metadata"]["uid"]))
    published = stack.driver.published()
    device_infos = _device_infos(live)
    rows = []
    ours = sorted((r for r in results if r["driver"] == DRIVER), key=lambda r: r["request"])
    # An extended-resource request allocates all its devices under one request name.
    shared = {r["request"] for r in ours if [o["request"] for o in ours].count(r["request"]) > 1}
    for result in ours:
        attrs = published.get(result["device"], {})
        pci = str(attrs.get(ATTR_PCI_BUS_ID, {}).get("string", "?"))
        partner = by_request.get(_partner(constraints, result["request"]))
        shadow = by_pci.get(pci)
        binding = shadow_binding(shadow) if shadow else {}
        interface = str(binding.get("interface", "-"))
        addresses = ipv4_addresses(links.get(interface, {}))
        rail = next((vf.rail for vf in stack.fake_node.vfs if vf.pci == pci), "?")
        rows.append(
            Row(
                request=f"{result['request']}/{result['device']}"
                if result["request"] in shared
                else result["request"],
                gpu=str(partner["device"]) if partner else "-",
                vf_pci=pci,
                pcie_root=str(attrs.get(ATTR_PCIE_ROOT, {}).get("string", "?")),
                rail=rail,
                source_nad="/".join((binding.get("source") or {}).get(k, "?") for k in ("namespace", "name"))
                if binding
                else "-",
                shadow_nad=str(shadow["metadata"]["name"]) if shadow else "-",
                interface=interface,
                ip=",".join(addresses) or "-",
                rdma=device_infos.get(f"{namespace}/{shadow['metadata']['name']}", "-") if shadow else "-",
            )
        )
    return Observed(live, claim, shadows, links, rows)
