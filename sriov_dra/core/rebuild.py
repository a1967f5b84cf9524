"""Checkpoint records rebuilt from the API objects this node owns, after a damaged checkpoint (pure).

A managed binding leaves two durable traces outside the checkpoint: its shadow NAD (the binding
annotation names node, Pod, claim, source, PCI address and interface; spec.config holds the frozen
bytes exactly as rendered) and its ResourceClaim (allocation, VfConfig, the one reserved Pod). A
shadow of this node that the starting generation does not account for is rebuilt into a `Pending`
record without a shadow UID: the state repair already knows how to finish, adopting the existing
shadow only on a full match and republishing the Pod's selections. A shadow that cannot be rebuilt
exactly stays what it was before, an orphan, and is named to the administrator.

Only what the first prepare decided without looking at the host can be rebuilt: a claim whose
VfConfig names a driver is not (the driver bound before it is known only to the lost record).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sriov_contract.binding import Binding, parse_binding
from sriov_contract.deviceinfo import parse_device_info
from sriov_contract.errors import ReasonedError
from sriov_contract.identity import BindingIdentity
from sriov_contract.keys import (
    BINDING_ANNOTATION,
    DEVICE_INFO_ANNOTATION,
    NODE_UID_LABEL,
    PROTOCOL_VERSION,
    REGISTRY_ANNOTATION,
)
from sriov_contract.registry import parse_registry
from sriov_dra.core.bindingrecord import PENDING, BindingRecord, records_of
from sriov_dra.core.checkpointrecovery import NotRebuilt
from sriov_dra.core.claimrecord import ClaimRecord, PreparedDevice
from sriov_dra.core.hostdevice import prepared_device
from sriov_dra.core.shadowspec import check_shadow
from sriov_dra.core.vfconfig import effective_vf_config
from sriov_dra.model import DRIVER_NAME, RdmaDevice


@dataclass(frozen=True)
class Rebuild:
    records: tuple[ClaimRecord, ...]
    not_rebuilt: tuple[NotRebuilt, ...]


@dataclass(frozen=True)
class _Shadow:
    obj: Mapping[str, Any]
    binding: Binding

    @property
    def namespace(self) -> str:
        return str((self.obj.get("metadata") or {}).get("namespace", ""))

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name", ""))


@dataclass(frozen=True)
class _Api:
    """What the API and the host say, for every claim rebuilt in one pass."""

    claims: Mapping[str, Mapping[str, Any]]
    pods: Mapping[str, Mapping[str, Any]]
    node_name: str
    node_uid: str
    pci_of: Mapping[str, str]
    rdma_of: Mapping[str, RdmaDevice]


class _Refused(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _accounted(records: Iterable[ClaimRecord]) -> set[str]:
    out: set[str] = set()
    for record in records:
        try:
            out.update(b.attachment_id for _d, b in records_of(record))
        except ReasonedError:
            continue  # repair refuses a malformed record loudly on its own
    return out


def rebuild(
    shadows: Iterable[Mapping[str, Any]],
    known: Mapping[str, ClaimRecord],
    claims: Mapping[str, Mapping[str, Any]],
    pods: Mapping[str, Mapping[str, Any]],
    *,
    node_name: str,
    node_uid: str,
    pci_of: Mapping[str, str],
    rdma_of: Mapping[str, RdmaDevice] | None = None,
) -> Rebuild:
    """Records for this node's shadows that `known` does not account for.

    `claims` and `pods` are indexed by UID (a missing Pod only costs the selection order);
    `pci_of` maps this node's device names to PCI addresses, `rdma_of` to their RDMA devices (a
    rebuilt record hands the container what the first prepare did).
    """
    accounted = _accounted(known.values())
    by_claim: dict[str, list[_Shadow]] = {}
    refused: list[NotRebuilt] = []
    for obj in shadows:
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(NODE_UID_LABEL) != node_uid:
            continue
        where = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        try:
            binding = parse_binding(str((meta.get("annotations") or {}).get(BINDING_ANNOTATION, "")))
        except ReasonedError as exc:
            refused.append(NotRebuilt(*where, f"unreadable binding: {exc.message}"))
            continue
        if binding.node_uid != node_uid or binding.attachment_id in accounted:
            continue
        if binding.claim_uid in known:
            refused.append(NotRebuilt(*where, "its claim is recorded without this binding"))
            continue
        by_claim.setdefault(binding.claim_uid, []).append(_Shadow(obj, binding))
    api = _Api(claims, pods, node_name, node_uid, pci_of, rdma_of or {})
    records = []
    for claim_uid, group in sorted(by_claim.items()):
        try:
            records.append(_claim_record(claim_uid, group, api))
        except _Refused as exc:
            refused += [NotRebuilt(s.namespace, s.name, exc.why) for s in group]
    return Rebuild(tuple(records), tuple(sorted(refused, key=lambda n: (n.namespace, n.name))))


def _claim_record(claim_uid: str, group: Sequence[_Shadow], api: _Api) -> ClaimRecord:
    claim = api.claims.get(claim_uid)
    if claim is None:
        raise _Refused(f"its ResourceClaim {claim_uid} is gone")
    meta, status = claim.get("metadata") or {}, claim.get("status") or {}
    reserved = status.get("reservedFor") or []
    pod_uids = {s.binding.pod_uid for s in group}
    if len(reserved) != 1 or {reserved[0].get("uid")} != pod_uids:
        raise _Refused(f"its claim is not reserved for exactly its Pod {sorted(pod_uids)}")
    pod_uid, pod_name = str(reserved[0].get("uid")), str(reserved[0].get("name", ""))
    devices = (status.get("allocation") or {}).get("devices") or {}
    results = [r for r in devices.get("results") or [] if r.get("driver") == DRIVER_NAME]
    by_pci = {s.binding.pci_address: s for s in group}
    order = _selection_order(api.pods.get(pod_uid))
    prepared: list[PreparedDevice] = []
    for result in results:
        name, pool, request = (
            str(result.get("device", "")),
            str(result.get("pool", "")),
            str(result.get("request", "")),
        )
        shadow = by_pci.pop(api.pci_of.get(name, ""), None)
        if pool != api.node_name or shadow is None:
            raise _Refused(f"the claim's device {pool}/{name} has no shadow of this node")
        config = effective_vf_config(devices.get("config") or [], request, DRIVER_NAME)
        if config.driver:
            raise _Refused(f"its VfConfig binds driver {config.driver}; the driver bound before is unknown")
        record = BindingRecord(
            phase=PENDING,
            identity=BindingIdentity(
                PROTOCOL_VERSION, api.node_uid, pod_uid, claim_uid, DRIVER_NAME, pool, name
            ),
            node_name=shadow.binding.node_name,
            pod_namespace=shadow.namespace,
            pod_name=pod_name,
            plan_index=order.get(shadow.binding.attachment_id, len(order)),
            interface=shadow.binding.interface,
            pci_address=shadow.binding.pci_address,
            source=shadow.binding.source,
            config=str((shadow.obj.get("spec") or {}).get("config", "")),
            **_device_info_of(shadow),
        )
        try:
            check_shadow(shadow.obj, record, releasing=True, binding=shadow.binding)
        except ReasonedError as exc:
            raise _Refused(exc.message) from exc
        prepared.append(
            prepared_device(
                claim_uid=claim_uid,
                pod_uid=pod_uid,
                request=request,
                pool=pool,
                name=name,
                pci_address=shadow.binding.pci_address,
                config=config,
                original_driver="",
                binding=record.to_json(),
                rdma=api.rdma_of.get(name),
            )
        )
    if by_pci:
        raise _Refused("the claim's allocation no longer holds this shadow's device")
    return ClaimRecord(
        claim_uid, str(meta.get("namespace", "")), str(meta.get("name", "")), pod_uid, tuple(prepared)
    )


def _device_info_of(shadow: _Shadow) -> dict[str, str]:
    """The frozen device info the shadow carries (none from drivers before it), back into the record."""
    text = ((shadow.obj.get("metadata") or {}).get("annotations") or {}).get(DEVICE_INFO_ANNOTATION)
    if text is None:
        return {}
    try:
        info = parse_device_info(str(text))
    except ReasonedError as exc:
        raise _Refused(f"unreadable device info: {exc.message}") from exc
    return {"pf_pci_address": info.pf_pci_address, "rdma_device": info.rdma_device}


def _selection_order(pod: Mapping[str, Any] | None) -> dict[str, int]:
    """Attachment ID -> its position in the Pod's registry, so republished selections keep their order."""
    text = ((pod or {}).get("metadata") or {}).get("annotations", {}).get(REGISTRY_ANNOTATION)
    if not isinstance(text, str):
        return {}
    try:
        entries = parse_registry(text).entries
    except ReasonedError:
        return {}
    return {e.attachment_id: i for i, e in enumerate(entries)}
