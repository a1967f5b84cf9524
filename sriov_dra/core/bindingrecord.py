"""The versioned managed-binding record each prepared VF carries in the checkpoint (spec 6.3: extend
the existing checkpoint, no second database).

It holds what the driver decided at the first prepare and must never re-decide: the frozen CNI
bytes and their hash, the source NAD's identity, the interface name and plan position, the
consuming Pod, and the observed shadow UID. The claim record and the prepared device supply the
rest of the binding identity (Pod and claim UID, pool, device, PCI address).

Phases: Pending (checkpointed, API work may be incomplete) -> Ready (shadow and Pod selection
published) -> Deleting (kubelet authorized release) -> ReleaseComplete (hardware restored; only
API/finalizer work remains). Release never goes backwards from ReleaseComplete.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Final

from sriov_contract.binding import Binding, SourceRef
from sriov_contract.deviceinfo import DEVICE_INFO_VERSION, DeviceInfo
from sriov_contract.errors import ReasonedError
from sriov_contract.identity import BindingIdentity, config_sha256
from sriov_contract.keys import BINDING_ANNOTATION, DEVICE_INFO_ANNOTATION, PROTOCOL_VERSION
from sriov_contract.registry import RegistryEntry
from sriov_dra import reasons
from sriov_dra.core.claimrecord import ClaimRecord, PreparedDevice
from sriov_dra.core.selection import ManagedBinding
from sriov_dra.core.template import NamespacedName
from sriov_dra.model import DRIVER_NAME, VirtualFunction

RECORD_VERSION: Final = 1
PENDING: Final = "Pending"
READY: Final = "Ready"
DELETING: Final = "Deleting"
RELEASE_COMPLETE: Final = "ReleaseComplete"
ACTIVE_PHASES: Final = frozenset({PENDING, READY})
RELEASE_PHASES: Final = frozenset({DELETING, RELEASE_COMPLETE})
PHASES: Final = ACTIVE_PHASES | RELEASE_PHASES


class BindingRecordError(ReasonedError):
    """A checkpointed managed binding is missing or malformed."""


@dataclass(frozen=True)
class BindingRecord:
    phase: str
    identity: BindingIdentity
    node_name: str
    pod_namespace: str
    pod_name: str
    plan_index: int
    interface: str
    pci_address: str
    source: SourceRef
    config: str
    """The frozen spec.config text of the shadow, exactly as rendered."""
    shadow_uid: str = ""
    # What discovery knew of the VF when the binding was planned, frozen with it (spec 10.4): the
    # shadow's device-info annotation. Records from before it have no PF address and no annotation.
    pf_pci_address: str = ""
    rdma_device: str = ""

    @property
    def attachment_id(self) -> str:
        return self.identity.attachment_id()

    @property
    def shadow_name(self) -> str:
        return self.identity.shadow_name()

    @property
    def config_sha256(self) -> str:
        return config_sha256(self.config.encode())

    def binding(self) -> Binding:
        """The binding annotation the shadow carries."""
        return Binding(
            version=PROTOCOL_VERSION,
            attachment_id=self.attachment_id,
            pod_uid=self.identity.pod_uid,
            claim_uid=self.identity.claim_uid,
            node_name=self.node_name,
            node_uid=self.identity.node_uid,
            source=self.source,
            pci_address=self.pci_address,
            interface=self.interface,
            config_sha256=self.config_sha256,
        )

    def device_info(self) -> DeviceInfo | None:
        """The shadow's device-info annotation, or None for a record planned before it existed."""
        if not self.pf_pci_address:
            return None
        return DeviceInfo(DEVICE_INFO_VERSION, self.pci_address, self.pf_pci_address, self.rdma_device)

    def annotations(self) -> dict[str, str]:
        """The driver's annotations on the shadow: the binding, and the device info when recorded."""
        out = {BINDING_ANNOTATION: self.binding().to_json()}
        info = self.device_info()
        if info is not None:
            out[DEVICE_INFO_ANNOTATION] = info.to_json()
        return out

    def managed_selection(self) -> ManagedBinding:
        """The Pod selection and registry entry; only valid once the shadow UID is known."""
        entry = RegistryEntry(
            attachment_id=self.attachment_id,
            claim_uid=self.identity.claim_uid,
            namespace=self.pod_namespace,
            name=self.shadow_name,
            uid=self.shadow_uid,
            interface=self.interface,
            config_sha256=self.config_sha256,
        )
        return ManagedBinding(entry, NamespacedName(self.source.namespace, self.source.name))

    def with_phase(self, phase: str) -> BindingRecord:
        return replace(self, phase=phase)

    def with_shadow_uid(self, uid: str) -> BindingRecord:
        return replace(self, shadow_uid=uid)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": RECORD_VERSION,
            "phase": self.phase,
            "attachmentID": self.attachment_id,
            "nodeName": self.node_name,
            "nodeUID": self.identity.node_uid,
            "podNamespace": self.pod_namespace,
            "podName": self.pod_name,
            "planIndex": self.plan_index,
            "interface": self.interface,
            "source": self.source.to_dict(),
            "config": self.config,
            "configSHA256": self.config_sha256,
            "shadowUID": self.shadow_uid,
            # Optional and additive (spec 6.3): a record without them reads as before.
            **(
                {"pfPciAddress": self.pf_pci_address, "rdmaDevice": self.rdma_device}
                if self.pf_pci_address
                else {}
            ),
        }


def _field(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise BindingRecordError(
            reasons.CORRUPT_MANAGED_BINDING,
            f"{where}: field {key!r} is missing or has the wrong type; the checkpoint was not changed. "
            "Drain the node and inspect the checkpoint",
        )
    return value


# Decoded bindings kept: a node's worth (a repair pass decodes every binding on every pass).
_DECODED_BINDINGS: Final = 16384


def record_of(claim: ClaimRecord, device: PreparedDevice) -> BindingRecord:
    """Decode one device's managed binding; a device without one is a migration condition."""
    if device.managed_binding is None:
        where = f"claim {claim.namespace}/{claim.name} ({claim.claim_uid}) device {device.device}"
        raise BindingRecordError(
            reasons.MANAGED_BINDING_MISSING,
            f"{where} was prepared without a managed network binding (before --multus-auto-attach was "
            "enabled); the driver will not guess a template for a VF that may be in use. Drain the node "
            "and recreate the Pod",
            claim_uid=claim.claim_uid,
        )
    # Everything the decoding reads, as one canonical text: equal text, equal record.
    inputs: list[object] = [claim.namespace, claim.name, claim.claim_uid, claim.pod_uid]
    inputs += [device.device, device.pool, device.pci_address, device.managed_binding]
    return _decoded(json.dumps(inputs, sort_keys=True, separators=(",", ":")))


@lru_cache(maxsize=_DECODED_BINDINGS)
def _decoded(inputs: str) -> BindingRecord:
    namespace, name, claim_uid, pod_uid, device_name, pool, pci_address, raw = json.loads(inputs)
    where = f"claim {namespace}/{name} ({claim_uid}) device {device_name}"
    source = _field(raw, "source", dict, where)
    try:
        record = BindingRecord(
            phase=_field(raw, "phase", str, where),
            identity=BindingIdentity(
                PROTOCOL_VERSION,
                _field(raw, "nodeUID", str, where),
                pod_uid,
                claim_uid,
                DRIVER_NAME,
                pool,
                device_name,
            ),
            node_name=_field(raw, "nodeName", str, where),
            pod_namespace=_field(raw, "podNamespace", str, where),
            pod_name=_field(raw, "podName", str, where),
            plan_index=_field(raw, "planIndex", int, where),
            interface=_field(raw, "interface", str, where),
            pci_address=pci_address,
            source=SourceRef(
                _field(source, "namespace", str, where),
                _field(source, "name", str, where),
                _field(source, "uid", str, where),
                _field(source, "resourceVersion", str, where),
            ),
            config=_field(raw, "config", str, where),
            shadow_uid=_field(raw, "shadowUID", str, where),
            **_device_fields(raw, where),
        )
    except BindingRecordError:
        raise
    except ReasonedError as exc:
        raise BindingRecordError(reasons.CORRUPT_MANAGED_BINDING, f"{where}: {exc.message}") from exc
    checks = (
        ("phase", record.phase in PHASES),
        ("attachmentID", raw.get("attachmentID") == record.attachment_id),
        ("configSHA256", raw.get("configSHA256") == record.config_sha256),
    )
    for field, ok in checks:
        if not ok:
            raise BindingRecordError(
                reasons.CORRUPT_MANAGED_BINDING,
                f"{where}: recorded {field} does not match the rest of the record; the checkpoint was "
                "not changed. Drain the node and inspect it",
            )
    return record


def frozen_device_info(vf: VirtualFunction) -> dict[str, str]:
    """The BindingRecord fields a VF's discovery fills in: its PF and its RDMA device name."""
    return {"pf_pci_address": vf.pf_pci_address, "rdma_device": vf.rdma.name if vf.rdma else ""}


def _device_fields(raw: Mapping[str, Any], where: str) -> dict[str, str]:
    if "pfPciAddress" not in raw:
        return {}
    out = {
        "pf_pci_address": _field(raw, "pfPciAddress", str, where),
        "rdma_device": _field(raw, "rdmaDevice", str, where),
    }
    # Validated as the annotation will be, so a bad record fails here and not at shadow creation.
    DeviceInfo(DEVICE_INFO_VERSION, "0000:00:00.0", out["pf_pci_address"], out["rdma_device"])
    return out


def records_of(claim: ClaimRecord) -> list[tuple[PreparedDevice, BindingRecord]]:
    return [(d, record_of(claim, d)) for d in claim.devices]


def phases_of(claim: ClaimRecord) -> set[str]:
    """The phases recorded on a claim's devices, without decoding the rest ("" = no binding)."""
    return {str((d.managed_binding or {}).get("phase", "")) for d in claim.devices}
