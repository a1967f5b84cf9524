"""What the gRPC layer needs from the node agent, independent of the kubelet API version."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ClaimRef:
    """A claim as kubelet names it; the claim object itself may already be gone on unprepare."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class DeviceResult:
    """One prepared device as reported to kubelet."""

    request_names: tuple[str, ...]
    pool: str
    device: str
    cdi_device_ids: tuple[str, ...]


@dataclass(frozen=True)
class PrepareOutcome:
    """Devices of one claim, or the reason it failed (then kubelet ignores the devices)."""

    devices: tuple[DeviceResult, ...] = ()
    error: str = ""


class NodeService(Protocol):
    """Prepares and unprepares claims; every claim gets its own outcome keyed by claim UID."""

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]: ...

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class DeviceHealthReport:
    """One device's health as the kubelet's resource-health stream carries it."""

    pool: str
    device: str
    healthy: bool
    message: str = ""


class DeviceHealthFeed(Protocol):
    """The node's device health for the kubelet's stream, which must always carry every device."""

    def reports(self, after: int, timeout: float) -> tuple[int, Sequence[DeviceHealthReport]]:
        """Every device's report and their version, as soon as the version differs from ``after``
        or once ``timeout`` seconds passed."""
        ...
