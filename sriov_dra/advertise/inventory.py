"""The node's device state: the full discovered inventory plus which VFs policy currently advertises.

Discovery keeps every VF (prepared claims and teardown need the hardware identity even after a
policy withdraws a device); policy only decides membership and extra attributes. Readers get
consistent snapshots under a reader/writer lock, so a prepare never sees half of a policy update.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from sriov_dra.core.devicehealth import HEALTHY, Verdict
from sriov_dra.model import TypedAttribute, VirtualFunction, typed_attribute


class RWLock:
    """Many concurrent readers or one writer; a waiting writer holds back new readers."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting_writers = 0

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._waiting_writers += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


@dataclass(frozen=True)
class AdvertisedDevice:
    """A VF as published: discovered attributes with policy attributes layered on top."""

    vf: VirtualFunction
    attributes: Mapping[str, TypedAttribute]
    health: Verdict = HEALTHY


class DeviceState:
    """Inventory plus advertised membership, guarded by one reader/writer lock."""

    def __init__(self, inventory: Mapping[str, VirtualFunction]) -> None:
        self._lock = RWLock()
        self._inventory = dict(inventory)
        self._policy: dict[str, dict[str, TypedAttribute]] = {}
        self._health: dict[str, Verdict] = {}

    def inventory(self) -> dict[str, VirtualFunction]:
        with self._lock.read():
            return dict(self._inventory)

    def advertised(self) -> list[AdvertisedDevice]:
        """The devices to publish, in device-name order (stable slices, no spurious updates)."""
        with self._lock.read():
            return [self._advertised(name) for name in sorted(self._policy)]

    def lookup(self, name: str) -> tuple[VirtualFunction | None, AdvertisedDevice | None]:
        """The discovered VF (even when withdrawn) and its advertised form when eligible."""
        with self._lock.read():
            vf = self._inventory.get(name)
            return vf, (self._advertised(name) if name in self._policy else None)

    def update_policy_devices(self, eligible: Mapping[str, Mapping[str, TypedAttribute]]) -> bool:
        """Set the advertised membership; True when anything publishable changed.

        A withdrawn device counts as a change even when it carried no policy attributes: the
        upstream driver compared attribute keys only and so never republished that withdrawal.
        """
        wanted = {
            name: {k: dict(v) for k, v in attrs.items()}
            for name, attrs in eligible.items()
            if name in self._inventory
        }
        with self._lock.write():
            changed = wanted != self._policy
            self._policy = wanted
            return changed

    def update_health(self, verdicts: Mapping[str, Verdict]) -> bool:
        """Record the devices' health; True when an advertised device's verdict changed (its
        slice must be republished with or without the taint)."""
        unhealthy = {name: v for name, v in verdicts.items() if not v.healthy and name in self._inventory}
        with self._lock.write():
            changed = {
                n for n in set(unhealthy) | set(self._health) if unhealthy.get(n) != self._health.get(n)
            }
            self._health = unhealthy
            return bool(changed & set(self._policy))

    def _advertised(self, name: str) -> AdvertisedDevice:
        vf = self._inventory[name]
        merged = dict(self._policy[name])
        # Discovered identity always wins: a policy cannot relabel hardware.
        merged.update((k, typed_attribute(v)) for k, v in vf.attributes.items())
        return AdvertisedDevice(vf=vf, attributes=merged, health=self._health.get(name, HEALTHY))
