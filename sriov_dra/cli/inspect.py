"""`sriov-dra inspect pod|node`: what the driver decided, read from the API and the checkpoint
(spec 19.2 items 1 and 2: each VF's rail, source NAD, shadow, interface and conflicting manual
selections, before anyone debugs a stuck sandbox). Read only: nothing here writes to the cluster
or the node."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sriov_contract.binding import parse_binding
from sriov_contract.errors import ReasonedError
from sriov_contract.keys import (
    BINDING_ANNOTATION,
    NETWORK_STATUS_ANNOTATION,
    NETWORKS_ANNOTATION,
    REGISTRY_ANNOTATION,
)
from sriov_contract.networks import parse_network_selections
from sriov_contract.registry import RegistryEntry, parse_registry
from sriov_dra import reasons
from sriov_dra.cli.common import (
    api_client,
    checkpoint_option,
    emit_json,
    kube_options,
    node_options,
    node_uid,
    output_option,
    read_checkpoint,
    reasoned,
    table,
)
from sriov_dra.core.claimrecord import ClaimRecord
from sriov_dra.model import ATTR_PCIE_ROOT, ATTR_PF_NAME, DRIVER_NAME, device_name

if TYPE_CHECKING:
    from kubernetes import client

POD_COLUMNS = (
    ("claim", "CLAIM"),
    ("request", "REQUEST"),
    ("device", "DEVICE"),
    ("pciAddress", "PCI"),
    ("pf", "PF"),
    ("pcieRoot", "PCIE-ROOT"),
    ("source", "SOURCE-NAD"),
    ("shadow", "SHADOW"),
    ("interface", "INTERFACE"),
    ("ips", "IPS"),
    ("phase", "PHASE"),
)


def _attribute(attrs: Mapping[str, Any], key: str) -> str:
    value = attrs.get(key) or {}
    return str(next(iter(value.values()), "")) if isinstance(value, Mapping) and value else ""


def slice_devices(slices: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Published attributes of this driver's devices, by device name."""
    return {
        str(d.get("name")): d.get("attributes") or {}
        for s in slices
        for d in (s.get("spec") or {}).get("devices") or []
    }


def network_status(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(NETWORK_STATUS_ANNOTATION)
    try:
        status = json.loads(text) if text else []
    except ValueError:
        return []
    return [s for s in status if isinstance(s, Mapping)] if isinstance(status, list) else []


def _phase(records: Sequence[ClaimRecord], claim_uid: str, device: str) -> str:
    for record in records:
        if record.claim_uid == claim_uid:
            for d in record.devices:
                if d.device == device:
                    return str((d.managed_binding or {}).get("phase", ""))
    return ""


def interface_rows(
    pod: Mapping[str, Any],
    shadows: Mapping[tuple[str, str], Mapping[str, Any] | None],
    claims: Mapping[str, Mapping[str, Any]],
    devices: Mapping[str, Mapping[str, Any]],
    records: Sequence[ClaimRecord] | None,
) -> list[dict[str, Any]]:
    """One row per managed interface the Pod's registry names, in registry order."""
    meta = pod.get("metadata") or {}
    text = (meta.get("annotations") or {}).get(REGISTRY_ANNOTATION)
    if not text:
        return []
    statuses = network_status(pod)
    rows = []
    for entry in parse_registry(text).entries:
        shadow = shadows.get((entry.namespace, entry.name))
        row: dict[str, Any] = {
            "shadow": entry.name,
            "interface": entry.interface,
            "claimUID": entry.claim_uid,
        }
        claim = claims.get(entry.claim_uid) or {}
        cmeta = claim.get("metadata") or {}
        row["claim"] = f"{cmeta['namespace']}/{cmeta['name']}" if cmeta else ""
        if shadow is None:
            row.update(phase="ShadowMissing")
        else:
            binding = parse_binding(
                str(((shadow.get("metadata") or {}).get("annotations") or {})[BINDING_ANNOTATION])
            )
            device = device_name(binding.pci_address)
            results = ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get(
                "results"
            ) or []
            requests = [
                r.get("request", "")
                for r in results
                if r.get("driver") == DRIVER_NAME and r.get("device") == device
            ]
            attrs = devices.get(device) or {}
            row.update(
                request=",".join(requests),
                device=device,
                pciAddress=binding.pci_address,
                pf=_attribute(attrs, ATTR_PF_NAME),
                pcieRoot=_attribute(attrs, ATTR_PCIE_ROOT),
                source=f"{binding.source.namespace}/{binding.source.name}",
                phase=_phase(records, entry.claim_uid, device) if records is not None else "",
            )
        ips = [
            ip
            for s in statuses
            if s.get("name") == f"{entry.namespace}/{entry.name}" and s.get("interface") == entry.interface
            for ip in s.get("ips") or []
        ]
        row["ips"] = ips
        rows.append(row)
    return rows


def manual_conflicts(
    pod: Mapping[str, Any], entries: Sequence[RegistryEntry], sources: Sequence[str]
) -> list[str]:
    """Hand-written selections that collide with managed ones: same shadow, interface or source."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    try:
        selections = parse_network_selections(
            annotations.get(NETWORKS_ANNOTATION), str(meta.get("namespace"))
        )
    except ReasonedError as exc:
        return [f"{NETWORKS_ANNOTATION} is unreadable: {exc.message}"]
    owned = {(e.namespace, e.name, e.interface) for e in entries}
    shadows = {(e.namespace, e.name) for e in entries}
    interfaces = {e.interface for e in entries}
    out = []
    for sel in selections:
        if sel.selection_tuple() in owned:
            continue
        name = f"{sel.namespace}/{sel.name}"
        if (sel.namespace, sel.name) in shadows:
            out.append(f"{name}: selects a managed shadow by hand")
        elif name in sources:
            out.append(f"{name}: selected by hand although the driver attaches it automatically")
        elif sel.interface and sel.interface in interfaces:
            out.append(f"{name}: asks for interface {sel.interface}, which a managed network uses")
    return out


def _fetch_pod_view(
    api: client.ApiClient, namespace: str, name: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    from sriov_dra.core.extendedclaim import extended_claim_name  # noqa: PLC0415
    from sriov_dra.kube.resources import KubeClaims, KubeNads, KubePods, KubeSlices  # noqa: PLC0415
    from sriov_dra.prepare.consumer import pod_claim_names  # noqa: PLC0415

    pod = KubePods(api).get_pod(namespace, name)
    if pod is None:
        raise ReasonedError(reasons.POD_NOT_FOUND, f"Pod {namespace}/{name} does not exist")
    text = (pod["metadata"].get("annotations") or {}).get(REGISTRY_ANNOTATION)
    entries = parse_registry(text).entries if text else ()
    nads = KubeNads(api)
    shadows = {(e.namespace, e.name): nads.get_nad(e.namespace, e.name) for e in entries}
    claims: dict[str, Mapping[str, Any]] = {}
    extended = extended_claim_name(pod)
    for claim_name in [n for _alias, n, _owner in pod_claim_names(pod)] + ([extended] if extended else []):
        claim = KubeClaims(api).get_claim(namespace, claim_name)
        claims[str(claim["metadata"]["uid"])] = claim
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    devices = slice_devices(KubeSlices(api, node).list()) if node else {}
    return pod, {"shadows": shadows, "claims": claims, "devices": devices, "entries": entries}


@click.group("inspect")
def inspect() -> None:
    """Show what the driver decided for a Pod or a node."""


@inspect.command("pod")
@click.argument("target", metavar="NAMESPACE/NAME")
@kube_options
@checkpoint_option("the Pod's node checkpoint, for phases (optional: phases show '-' without it)")
@output_option
@reasoned
def inspect_pod(target: str, kubeconfig: str | None, checkpoint: Path, output: str) -> None:
    """One row per managed interface of the Pod, and any conflicting manual selections."""
    namespace, _, name = target.partition("/")
    if not namespace or not name:
        raise ReasonedError(reasons.INVALID_TARGET, f"{target!r} is not NAMESPACE/NAME")
    api = api_client(kubeconfig)
    pod, view = _fetch_pod_view(api, namespace, name)
    try:
        records: list[ClaimRecord] | None = read_checkpoint(checkpoint)
    except ReasonedError:
        records = None
    rows = interface_rows(pod, view["shadows"], view["claims"], view["devices"], records)
    conflicts = manual_conflicts(pod, view["entries"], [r["source"] for r in rows if r.get("source")])
    if output == "json":
        emit_json(
            {
                "pod": {"namespace": namespace, "name": name, "uid": pod["metadata"]["uid"]},
                "interfaces": rows,
                "manualConflicts": conflicts,
            }
        )
        return
    body = [[", ".join(r[key]) if key == "ips" else r.get(key, "") for key, _ in POD_COLUMNS] for r in rows]
    click.echo(f"Pod {namespace}/{name} ({pod['metadata']['uid']})")
    click.echo(table([h for _, h in POD_COLUMNS], body), nl=False)
    for line in conflicts:
        click.echo(f"conflicting manual selection: {line}")


@inspect.command("node")
@node_options
@click.option(
    "--namespace", envvar="NAMESPACE", default="dra-driver-sriov", show_default=True, help="policies"
)
@click.option("--sysfs-root", envvar="SYSFS_ROOT", type=click.Path(path_type=Path), default=Path("/sys"))
@click.option(
    "--multus-auto-attach/--no-multus-auto-attach",
    "managed",
    envvar="MULTUS_AUTO_ATTACH",
    default=True,
    show_default=True,
    help="evaluate policies as the agent does in this mode",
)
@output_option
@reasoned
def inspect_node(
    *,
    kubeconfig: str | None,
    node: str,
    checkpoint: Path,
    namespace: str,
    sysfs_root: Path,
    managed: bool,
    output: str,
) -> None:
    """Bindings by phase, Unhealthy devices, orphaned shadows, and devices the policies withhold and why."""
    from sriov_dra.core.devicehealth import judge_all  # noqa: PLC0415
    from sriov_dra.core.policy import evaluate  # noqa: PLC0415
    from sriov_dra.kube.resources import KubePolicySource, KubeShadowLister  # noqa: PLC0415
    from sriov_dra.recovery.orphans import scan  # noqa: PLC0415
    from sriov_dra.state.checkpoint import RecoveryLog  # noqa: PLC0415
    from sriov_dra.sysfs.discovery import discover  # noqa: PLC0415
    from sriov_dra.sysfs.linkstate import observe  # noqa: PLC0415

    api = api_client(kubeconfig)
    uid = node_uid(api, node)
    records = read_checkpoint(checkpoint)
    bindings = [
        {
            "claim": f"{r.namespace}/{r.name}",
            "claimUID": r.claim_uid,
            "podUID": r.pod_uid,
            "device": d.device,
            "pciAddress": d.pci_address,
            "interface": str((d.managed_binding or {}).get("interface", "")),
            "phase": str((d.managed_binding or {}).get("phase", "")) or "Unmanaged",
        }
        for r in records
        for d in r.devices
    ]
    suspicious = [
        s for s in scan(KubeShadowLister(api), records, uid) if s.status in ("Orphan", reasons.CONFLICT)
    ]
    source = KubePolicySource(api, namespace, node)
    _uid, labels = source.node()
    inventory = discover(sysfs_root)
    blocked = evaluate(
        policies=source.policies(),
        device_attributes=source.device_attributes(),
        node_name=node,
        node_labels=labels,
        inventory=inventory,
        managed=managed,
    ).blocked
    # The driver's own verdict, judged again from what sysfs shows now.
    unhealthy = {
        n: v.message for n, v in sorted(judge_all(observe(sysfs_root, inventory)).items()) if not v.healthy
    }
    by_phase = dict(sorted(Counter(b["phase"] for b in bindings).items()))
    recovery = RecoveryLog(checkpoint).read()
    if output == "json":
        emit_json(
            {
                "node": node,
                "nodeUID": uid,
                "bindingsByPhase": by_phase,
                "bindings": bindings,
                "unhealthyDevices": [{"device": k, "why": v} for k, v in unhealthy.items()],
                "orphans": [s.to_json() for s in suspicious],
                "blockedDevices": [{"device": k, "why": v} for k, v in sorted(blocked.items())],
                "checkpointRecovery": recovery,
            }
        )
        return
    click.echo(f"Node {node} ({uid})")
    click.echo("bindings by phase: " + (", ".join(f"{k}={v}" for k, v in by_phase.items()) or "none"))
    click.echo(_recovery_line(recovery))
    keys = ("claim", "device", "pciAddress", "interface", "phase", "podUID")
    click.echo(table([k.upper() for k in keys], [[b[k] for k in keys] for b in bindings]), nl=False)
    click.echo(f"unhealthy devices: {len(unhealthy) or 'none'}")
    for name, why in unhealthy.items():
        click.echo(f"  {name}: {why}")
    click.echo(f"orphans: {len(suspicious) or 'none'}")
    for s in suspicious:
        click.echo(f"  {s.namespace}/{s.name} {s.status} {s.attachment_id or '-'}: {s.detail}")
    click.echo(f"blocked devices: {len(blocked) or 'none'}")
    for name, why in sorted(blocked.items()):
        click.echo(f"  {name}: {why}")


def _recovery_line(recovery: Mapping[str, Any] | None) -> str:
    """The last start from a damaged checkpoint (checkpoint.recovery.json), or that there was none."""
    if recovery is None:
        return "checkpoint recovery: none"
    return f"checkpoint recovery at {recovery.get('time', '?')}: {recovery.get('message', '')}"
