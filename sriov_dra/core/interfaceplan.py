"""The Pod's managed interface plan: one binding identity and interface name per physical VF (spec
6.2: identity from node, Pod, claim, driver, pool and device; 6.5: dra0, dra1, ... in sorted order).

The plan covers every device this driver allocated across all of the Pod's claims, computed
from allocations alone, so it does not depend on which claim kubelet prepares first, on RPC
batching or on map order. The names are persisted with the first plan and never recomputed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_contract.errors import ContractError
from sriov_contract.identity import BindingIdentity
from sriov_contract.keys import PROTOCOL_VERSION
from sriov_contract.names import validate_interface
from sriov_dra.core.errors import (
    CONFLICTING_DEVICE_REQUIREMENTS,
    DUPLICATE_INTERFACE_NAME,
    DUPLICATE_PCI_ADDRESS,
    INVALID_INTERFACE_NAME,
    UNREFERENCED_CLAIM,
    fail,
)
from sriov_dra.core.pci import normalize_pci_address
from sriov_dra.core.template import NamespacedName

DEFAULT_PREFIX: Final = "dra"


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One allocation result of this driver, with what its resolved configuration requires."""

    claim_uid: str
    request: str
    pool: str
    device: str
    pci_address: str
    template: NamespacedName
    interface: str = ""
    """An explicit interface name from the effective VfConfig; empty means dra<N>."""
    vf_driver: str = ""

    def requirements(self) -> tuple[str, NamespacedName, str, str]:
        return (normalize_pci_address(self.pci_address), self.template, self.interface, self.vf_driver)


@dataclass(frozen=True, slots=True)
class PlannedInterface:
    identity: BindingIdentity
    claim_alias: str
    requests: tuple[str, ...]
    pci_address: str
    template: NamespacedName
    interface: str
    vf_driver: str


def canonical_aliases(pod_claims: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Claim UID -> its lexically first alias among (alias, claim UID) pairs from pod.spec.resourceClaims."""
    aliases: dict[str, str] = {}
    for alias, uid in pod_claims:
        aliases[uid] = min(alias, aliases.get(uid, alias))
    return aliases


def plan_interfaces(
    *,
    node_uid: str,
    pod_uid: str,
    driver: str,
    claim_aliases: Mapping[str, str],
    devices: Sequence[AllocatedDevice],
    primary_interface: str = "eth0",
) -> tuple[PlannedInterface, ...]:
    """Deduplicate, order and name the Pod's devices; refuse anything ambiguous."""

    def alias(dev: AllocatedDevice) -> str:
        if dev.claim_uid not in claim_aliases:
            raise fail(
                UNREFERENCED_CLAIM,
                f"claim {dev.claim_uid} allocated device {dev.pool}/{dev.device} but Pod {pod_uid} does not "
                "reference it in spec.resourceClaims; re-resolve the Pod's claims",
                claim_uid=dev.claim_uid,
            )
        return claim_aliases[dev.claim_uid]

    ordered = sorted(devices, key=lambda d: (alias(d), d.request, d.pool, d.device))
    merged: dict[tuple[str, str, str], list[AllocatedDevice]] = {}
    for dev in ordered:
        group = merged.setdefault((dev.claim_uid, dev.pool, dev.device), [])
        if group and group[0].requirements() != dev.requirements():
            raise fail(
                CONFLICTING_DEVICE_REQUIREMENTS,
                f"device {dev.pool}/{dev.device} of claim {dev.claim_uid} is allocated to requests "
                f"{group[0].request} and {dev.request} with different template/interface/driver "
                "configuration; give both requests the same configuration",
                claim_uid=dev.claim_uid,
            )
        group.append(dev)
    _reject_shared_pci(merged.values())
    planned = [
        _planned(group, index, node_uid=node_uid, pod_uid=pod_uid, driver=driver, alias=alias(group[0]))
        for index, group in enumerate(merged.values())
    ]
    _check_names(planned, merged.values(), primary_interface)
    return tuple(planned)


def _planned(
    group: list[AllocatedDevice], index: int, *, node_uid: str, pod_uid: str, driver: str, alias: str
) -> PlannedInterface:
    first = group[0]
    identity = BindingIdentity(
        PROTOCOL_VERSION, node_uid, pod_uid, first.claim_uid, driver, first.pool, first.device
    )
    return PlannedInterface(
        identity=identity,
        claim_alias=alias,
        requests=tuple(d.request for d in group),
        pci_address=normalize_pci_address(first.pci_address),
        template=first.template,
        interface=first.interface or f"{DEFAULT_PREFIX}{index}",
        vf_driver=first.vf_driver,
    )


def _reject_shared_pci(groups: Iterable[list[AllocatedDevice]]) -> None:
    owners: dict[str, AllocatedDevice] = {}
    for group in groups:
        dev = group[0]
        pci = normalize_pci_address(dev.pci_address)
        other = owners.setdefault(pci, dev)
        if other is not dev:
            raise fail(
                DUPLICATE_PCI_ADDRESS,
                f"PCI address {pci} is allocated both as {other.pool}/{other.device} (claim {other.claim_uid}) "
                f"and as {dev.pool}/{dev.device} (claim {dev.claim_uid}); one VF cannot back two "
                "attachments: check discovery and the allocations",
                pci_address=pci,
            )


def _check_names(
    planned: Sequence[PlannedInterface], groups: Iterable[list[AllocatedDevice]], primary: str
) -> None:
    seen: dict[str, AllocatedDevice] = {}
    for plan, group in zip(planned, groups, strict=True):
        dev = group[0]
        where = f"device {dev.pool}/{dev.device} (claim {dev.claim_uid}, request {dev.request})"
        if dev.interface:
            try:
                validate_interface(dev.interface, "ifName")
            except ContractError as exc:
                raise fail(INVALID_INTERFACE_NAME, f"{where}: {exc.message}; fix VfConfig ifName") from exc
            if dev.interface == primary:
                raise fail(
                    INVALID_INTERFACE_NAME,
                    f"{where}: ifName {dev.interface!r} is the Pod's primary interface; choose another name",
                )
        other = seen.setdefault(plan.interface, dev)
        if other is not dev:
            same_request = other.claim_uid == dev.claim_uid and other.request == dev.request
            why = (
                f"request {dev.request} allocates several VFs but its VfConfig gives them all ifName "
                f"{plan.interface!r}, which is ambiguous; remove ifName so each VF gets dra<N>"
                if same_request
                else f"interface {plan.interface!r} is also used by {other.pool}/{other.device} "
                f"(claim {other.claim_uid}); give each VF a distinct ifName"
            )
            raise fail(DUPLICATE_INTERFACE_NAME, f"{where}: {why}", interface=plan.interface)
