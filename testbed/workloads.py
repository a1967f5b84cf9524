"""The workloads the scenarios run, from docs/examples with only the spec's allowed edits (real PF
names, and where whereabouts finds its datastore): spec 14.2's GPU/NIC pairs, 14.1's one-network
DeviceClass, the one-line extended-resource request, a second Pod on the same rails, and
one-VF-per-rail Pods for a two-node stack."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from sriov_contract.errors import ReasonedError
from sriov_dra.model import ATTR_PCIE_ROOT
from testbed.deployment import EXAMPLES_DIR

if TYPE_CHECKING:
    from testbed.fakenode import FakeNode
    from testbed.sriov_topology import VfRecord
    from testbed.stack import Stack

WORKLOAD_NS = "ai-workloads"
NODE_LABEL = "networking.example.com/dual-rail"  # the examples' nodeSelector


def load_examples(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES_DIR / name).read_text()) if d]


def find(docs: Sequence[Mapping[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    for doc in docs:
        if doc["kind"] == kind and (name is None or doc["metadata"]["name"] == name):
            return dict(doc)
    raise ReasonedError("ExampleMissing", f"docs/examples has no {kind} {name or ''}; restore the example")


def substitute(
    docs: Sequence[Mapping[str, Any]], pf_names: Mapping[str, str], ipam: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The spec's only allowed edits: real PF names, and where whereabouts finds its datastore."""
    out = []
    for original in docs:
        doc = copy.deepcopy(dict(original))
        if doc["kind"] == "SriovResourcePolicy":
            for config in doc["spec"]["configs"]:
                for selector in config.get("resourceFilters") or []:
                    selector["pfNames"] = [pf_names.get(n, n) for n in selector.get("pfNames") or []]
        if doc["kind"] == "NetworkAttachmentDefinition":
            config = json.loads(doc["spec"]["config"])
            if (config.get("ipam") or {}).get("type") == "whereabouts":
                config["ipam"].update(ipam)
            doc["spec"]["config"] = json.dumps(config, indent=2)
        out.append(doc)
    return out


@dataclass(frozen=True)
class Workload:
    """Administrator objects plus the workload Pod, and what the node must advertise first."""

    name: str
    admin: tuple[dict[str, Any], ...]
    workload: tuple[dict[str, Any], ...]
    pod: dict[str, Any]
    advertised: frozenset[str]  # VF PCI addresses the driver must publish before the Pod starts

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    def objects(self) -> list[dict[str, Any]]:
        return [*self.admin, *self.workload]


def pairs_workload(node: FakeNode, ipam: Mapping[str, Any]) -> Workload:
    """Spec 14.2 exactly as docs/examples has it, with the physical substitutions."""
    docs = substitute(load_examples("multus-auto-gpu-nic-pairs.yaml"), pf_renames(node), ipam)
    workload_kinds = ("DeviceClass", "ResourceClaimTemplate")
    return Workload(
        "gpu-nic-pairs",
        admin=tuple(d for d in docs if d["kind"] not in (*workload_kinds, "Pod")),
        workload=tuple(d for d in docs if d["kind"] in workload_kinds),
        pod=find(docs, "Pod"),
        advertised=frozenset(vf.pci for vf in node.vfs),
    )


def rail_sriov_conf(rail: str, subnet: str, ipam: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    """A rail's sriov config: whereabouts on the rail's subnet (.10 to .200), `ipam` laid over it."""
    first = subnet.rsplit(".", 1)[0]
    return {
        "cniVersion": "1.0.0",
        "name": f"{WORKLOAD_NS}-{rail}",
        "type": "sriov",
        **extra,
        "ipam": {
            "type": "whereabouts",
            "network_name": f"{WORKLOAD_NS}-{rail}",
            "range": subnet,
            "range_start": f"{first}.10",
            "range_end": f"{first}.200",
            **ipam,
        },
    }


def eight_pairs_workload(node: FakeNode, ipam: Mapping[str, Any]) -> Workload:
    """Issue 36's AI node: one Pod with eight GPU/NIC pairs, one per PCIe root, on the eight-pair
    fake node (fixtures/topologies/eight-pair.yaml). Spec 14.2's objects grown from two rails to
    the node's rails: per rail its source NAD (whereabouts on the rail's subnet), its
    DeviceAttributes and its policy entry; the template pairs gpu-i with nic-i by pcieRoot."""
    pairs = load_examples("multus-auto-gpu-nic-pairs.yaml")
    attrs, policy = (
        find(pairs, "DeviceAttributes", "rail-a-network-attributes"),
        find(pairs, "SriovResourcePolicy"),
    )
    admin: list[dict[str, Any]] = [d for d in pairs if d["kind"] == "Namespace"]
    configs = []
    for pf in node.pfs:
        net = f"{pf.rail}-net"
        conf = rail_sriov_conf(pf.rail, pf.subnet, ipam)
        admin.append(
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": net, "namespace": WORKLOAD_NS},
                "spec": {"config": json.dumps(conf, indent=2)},
            }
        )
        entry = copy.deepcopy(attrs)
        entry["metadata"] = {
            **attrs["metadata"],
            "name": f"{pf.rail}-network-attributes",
            "labels": {"networking.example.com/template": net},
        }
        for value in entry["spec"]["attributes"].values():  # the example's one name attribute
            value["string"] = net
        admin.append(entry)
        configs.append(
            {
                "deviceAttributesSelector": {"matchLabels": {"networking.example.com/template": net}},
                "resourceFilters": [{"vendors": [pf.vendor], "pfNames": [pf.netdev], "linkType": "eth"}],
            }
        )
    admin.append({**copy.deepcopy(policy), "spec": {**policy["spec"], "configs": configs}})
    count = len(node.pfs)
    requests = []
    for i in range(count):
        for kind, device_class in (("gpu", "nvidia-gpu-pcie"), ("nic", "sriov-pcie-netdevice")):
            requests.append(
                {
                    "name": f"{kind}-{i}",
                    "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1},
                }
            )
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "eight-gpu-nic-pairs", "namespace": WORKLOAD_NS},
        "spec": {
            "spec": {
                "devices": {
                    "requests": requests,
                    "constraints": [
                        {"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": ATTR_PCIE_ROOT}
                        for i in range(count)
                    ],
                }
            }
        },
    }
    pod = copy.deepcopy(find(pairs, "Pod"))
    pod["metadata"]["name"] = "eight-pairs"
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": "eight-gpu-nic-pairs"}]
    return Workload(
        "eight-pairs",
        admin=tuple(admin),
        workload=(*(d for d in pairs if d["kind"] == "DeviceClass"), template),
        pod=pod,
        advertised=frozenset(vf.pci for vf in node.vfs),
    )


def one_network_workload(node: FakeNode, ipam: Mapping[str, Any]) -> Workload:
    """Spec 14.1: one NAD named once in a DeviceClass; a Pod like 14.2's using its template."""
    pairs = load_examples("multus-auto-gpu-nic-pairs.yaml")
    one = load_examples("one-network-deviceclass.yaml")
    source = [d for d in pairs if d["kind"] == "Namespace"] + [
        find(pairs, "NetworkAttachmentDefinition", "rail-a-net")
    ]
    docs = substitute([*source, *one], pf_renames(node), ipam)
    pod = copy.deepcopy(find(pairs, "Pod"))
    pod["metadata"]["name"] = "one-network-demo"
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": "one-network-vf"}]
    policy = find(docs, "SriovResourcePolicy")
    pfs = set(policy["spec"]["configs"][0]["resourceFilters"][0]["pfNames"])
    return Workload(
        "one-network",
        # Here the administrator's DeviceClass names the NAD once; the workload is the template.
        admin=tuple(d for d in docs if d["kind"] != "ResourceClaimTemplate"),
        workload=tuple(d for d in docs if d["kind"] == "ResourceClaimTemplate"),
        pod=pod,
        advertised=frozenset(vf.pci for vf in node.vfs if vf.pf in pfs),
    )


def extended_resource_workload(node: FakeNode, ipam: Mapping[str, Any]) -> Workload:
    """One-line requests (docs/examples/extended-resource-vfs.yaml): spec 14.2's rails, and a
    DeviceClass with an extendedResourceName that the Pod asks two VFs of in resources.limits."""
    pairs = substitute(load_examples("multus-auto-gpu-nic-pairs.yaml"), pf_renames(node), ipam)
    extended = load_examples("extended-resource-vfs.yaml")
    return Workload(
        "extended-resource",
        # The administrator publishes the extended resource; the user writes one line.
        admin=(
            *(d for d in pairs if d["kind"] not in ("DeviceClass", "ResourceClaimTemplate", "Pod")),
            find(extended, "DeviceClass"),
        ),
        workload=(),
        pod=find(extended, "Pod"),
        advertised=frozenset(vf.pci for vf in node.vfs),
    )


def one_line_pod(resource: str, count: int, name: str) -> dict[str, Any]:
    """The example's one-line Pod asking for `count` of another extended resource."""
    pod = copy.deepcopy(find(load_examples("extended-resource-vfs.yaml"), "Pod"))
    pod["metadata"]["name"] = name
    (container,) = pod["spec"]["containers"]
    container["resources"] = {"limits": {resource: str(count)}}
    return pod


def second_pod(pairs: Workload) -> tuple[dict[str, Any], dict[str, Any]]:
    """Another Pod on the same node with one VF on each rail (both GPUs are taken by the first)."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "nic-per-root", "namespace": pairs.namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": n, "exactly": {"deviceClassName": "sriov-pcie-netdevice", "count": 1}}
                        for n in ("nic-0", "nic-1")
                    ],
                    "constraints": [{"requests": ["nic-0", "nic-1"], "distinctAttribute": ATTR_PCIE_ROOT}],
                }
            }
        },
    }
    pod = copy.deepcopy(pairs.pod)
    pod["metadata"]["name"] = "second-pod"
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": "nic-per-root"}]
    return template, pod


def rails_workload(stack: Stack, name: str = "rails") -> Workload:
    """Pods with one VF on each rail (distinct PCIe roots, no GPU) on any node of the stack: spec
    14.2's administrator objects, each policy naming the PFs of every node (the fake nodes' run
    prefixes make their names differ), and the VF-only template of :func:`second_pod`."""
    pairs = pairs_workload(stack.fake_node, stack.cni.whereabouts_ipam())
    template, pod = second_pod(pairs)
    admin = copy.deepcopy(list(pairs.admin))
    for doc in admin:
        if doc["kind"] != "SriovResourcePolicy":
            continue
        for config in doc["spec"]["configs"]:
            for selector in config.get("resourceFilters") or []:
                selector["pfNames"] = [
                    node.fake_node.prefix + pf.removeprefix(stack.fake_node.prefix)
                    for pf in selector["pfNames"]
                    for node in stack.nodes
                ]
    pod["metadata"]["name"] = name
    # Its PID 1 ignores SIGTERM: a deletion would otherwise wait out the example's 5 s grace.
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    return Workload(
        name,
        admin=tuple(admin),
        workload=(find(pairs.workload, "DeviceClass", "sriov-pcie-netdevice"), template),
        pod=pod,
        advertised=pairs.advertised,
    )


def pf_renames(node: FakeNode) -> dict[str, str]:
    return {pf.netdev.removeprefix(node.prefix): pf.netdev for pf in node.pfs}


def network_names(workload: Workload) -> list[str]:
    names = []
    for doc in workload.admin:
        if doc["kind"] == "NetworkAttachmentDefinition":
            ipam = json.loads(doc["spec"]["config"]).get("ipam") or {}
            names.append(str(ipam.get("network_name", "")))
    return names


def legacy_pool(node: FakeNode) -> tuple[VfRecord, ...]:
    """The VFs the bed's device plugin advertises (testbed/device_plugin.py): each PF's last VF."""
    return tuple(pf.vfs[-1] for pf in node.pfs if pf.vfs)


def excluding(workload: Workload, node: FakeNode, pcis: Sequence[str]) -> Workload:
    """``workload`` with ``pcis`` left out of every SriovResourcePolicy filter (an added
    ``pciAddresses`` list of the node's other VFs) and out of what must be advertised: spec 18.1's
    one provider per VF when a device plugin owns them."""
    others = sorted(vf.pci for vf in node.vfs if vf.pci not in pcis)
    admin = copy.deepcopy(list(workload.admin))
    for doc in admin:
        if doc["kind"] == "SriovResourcePolicy":
            for config in doc["spec"]["configs"]:
                for selector in config.get("resourceFilters") or []:
                    selector["pciAddresses"] = others
    return dataclasses.replace(
        workload, admin=tuple(admin), advertised=frozenset(p for p in workload.advertised if p not in pcis)
    )


def legacy_objects(
    like: Workload, resource: str, subnet: str, data_dir: str, name: str = "legacy"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The legacy resourceName path's objects beside ``like``'s Pod: a NAD annotated with the
    device plugin's resource (sriov-cni with host-local on ``subnet``) and a Pod that asks for one
    of its devices in ``resources.limits`` and selects the NAD by hand."""
    namespace = like.namespace
    nad = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": f"{name}-net",
            "namespace": namespace,
            "annotations": {"k8s.v1.cni.cncf.io/resourceName": resource},
        },
        "spec": {
            "config": json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": f"{name}-net",
                    "type": "sriov",
                    "ipam": {"type": "host-local", "subnet": subnet, "dataDir": data_dir},
                }
            )
        },
    }
    pod = copy.deepcopy(like.pod)
    pod["metadata"] = {
        "name": name,
        "namespace": namespace,
        "annotations": {"k8s.v1.cni.cncf.io/networks": f"{name}-net"},
    }
    pod["spec"].pop("resourceClaims", None)
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    for container in pod["spec"]["containers"]:
        container["resources"] = {"limits": {resource: "1"}}
    return nad, pod
