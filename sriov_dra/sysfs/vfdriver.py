"""Binding a VF to the kernel driver a claim asked for, through sysfs.

``""`` keeps whatever is bound; ``default`` returns the VF to its kernel driver; any other name
(e.g. ``vfio-pci``) binds that driver via ``driver_override``. The driver bound before is returned
so unprepare can restore it. Kernel-mode VFs must expose a netdevice, or the Pod would get a VF
with no interface to configure.
"""

from __future__ import annotations

import os
from pathlib import Path

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.model import USERSPACE_DRIVERS, RdmaDevice
from sriov_dra.sysfs.rdma import rdma_device

DEFAULT = "default"


class VfDriverError(ReasonedError):
    """A VF could not be bound to, or verified on, the requested driver."""


class SysfsVfDriver:
    """Driver binding for PCI devices below a sysfs root."""

    def __init__(self, sysfs: Path) -> None:
        self._sysfs = sysfs
        self._pci = sysfs / "bus" / "pci"

    def _dev(self, bdf: str) -> Path:
        return self._pci / "devices" / bdf

    def current(self, bdf: str) -> str:
        try:
            return os.path.basename(os.readlink(self._dev(bdf) / "driver"))
        except OSError:
            return ""

    def netdevs(self, bdf: str) -> list[str]:
        try:
            return sorted(p.name for p in (self._dev(bdf) / "net").iterdir())
        except OSError:
            return []

    def rdma(self, bdf: str) -> RdmaDevice | None:
        return rdma_device(self._sysfs, bdf)

    def iommu_group(self, bdf: str) -> str | None:
        try:
            return os.path.basename(os.readlink(self._dev(bdf) / "iommu_group"))
        except OSError:
            return None

    def bind(self, bdf: str, driver: str) -> str:
        """Bind as requested; returns the driver bound before ("" when nothing changed)."""
        if not driver:
            return ""
        before = self.current(bdf)
        if driver == DEFAULT:
            if before and before not in USERSPACE_DRIVERS:
                return ""
            self._bind_default(bdf, before)
        else:
            if before == driver:
                return ""
            self._bind_to(bdf, before, driver)
        return before or ""

    def restore(self, bdf: str, original: str) -> None:
        """Put back the driver recorded at prepare ("" means the kernel default)."""
        before = self.current(bdf)
        if original:
            if before != original:
                self._bind_to(bdf, before, original)
        elif not before or before in USERSPACE_DRIVERS:
            self._bind_default(bdf, before)

    def verify_kernel_netdev(self, bdf: str) -> None:
        """A kernel-mode VF must be bound to a kernel driver and expose a netdevice."""
        bound = self.current(bdf)
        if not bound or bound in USERSPACE_DRIVERS:
            raise VfDriverError(
                reasons.VF_NOT_KERNEL_BOUND,
                f"VF {bdf} is bound to {bound or 'no driver'}, not a kernel network driver; request "
                "driver 'default' in the VfConfig or rebind it",
                pci=bdf,
            )
        if not self.netdevs(bdf):
            raise VfDriverError(
                reasons.VF_NETDEVICE_MISSING,
                f"VF {bdf} is bound to {bound} but has no network interface; check the PF's "
                "SR-IOV setup (sriov_numvfs) and the kernel log",
                pci=bdf,
            )

    def _write(self, path: Path, value: str, bdf: str) -> None:
        try:
            path.write_text(value)
        except OSError as exc:
            raise VfDriverError(
                reasons.VF_DRIVER_BIND_FAILED,
                f"writing {value.strip()!r} to {path} for VF {bdf} failed ({exc}); check the driver "
                "module is loaded and the VF is not in use",
                pci=bdf,
            ) from exc

    def _unbind(self, bdf: str, current: str) -> None:
        if current:
            self._write(self._pci / "drivers" / current / "unbind", bdf, bdf)

    def _bind_to(self, bdf: str, current: str, driver: str) -> None:
        self._unbind(bdf, current)
        override = self._dev(bdf) / "driver_override"
        if override.exists():
            self._write(override, driver, bdf)
        self._write(self._pci / "drivers" / driver / "bind", bdf, bdf)
        if override.exists():
            self._write(override, "\x00", bdf)
        self._expect(bdf, driver)

    def _bind_default(self, bdf: str, current: str) -> None:
        self._unbind(bdf, current)
        override = self._dev(bdf) / "driver_override"
        if override.exists():
            self._write(override, "\x00", bdf)
        self._write(self._pci / "drivers_probe", bdf, bdf)
        bound = self.current(bdf)
        if not bound or bound in USERSPACE_DRIVERS:
            raise VfDriverError(
                reasons.VF_DRIVER_BIND_FAILED,
                f"VF {bdf} did not return to a kernel driver after probing (bound: {bound or 'none'})",
                pci=bdf,
            )

    def _expect(self, bdf: str, driver: str) -> None:
        bound = self.current(bdf)
        if bound != driver:
            raise VfDriverError(
                reasons.VF_DRIVER_BIND_FAILED,
                f"VF {bdf} is bound to {bound or 'no driver'} after binding {driver}; check that the "
                f"{driver} module is loaded and accepts this device",
                pci=bdf,
            )
