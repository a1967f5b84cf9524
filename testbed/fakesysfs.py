"""A sysfs-shaped tree for a planned fake SR-IOV node, laid out the way upstream discovery reads it.

Devices live under ``devices/pci<DDDD:BB>/<root port>/<BDF>`` so the PCIe root can be derived from
the resolved path exactly as upstream does; ``bus/pci/devices``, ``bus/pci/drivers`` and
``class/net`` are relative symlinks into that tree.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from sriov_contract.errors import ReasonedError
from testbed.sriov_topology import BRIDGE_CLASS, GPU_CLASS, NET_CLASS, NodePlan

# Top-level entries this module creates below the root; teardown removes exactly these.
OWNED_ENTRIES = ("devices", "bus", "class", "dev")
# The device root: what /dev is to a node (the driver's DEV_ROOT, CDI hostPaths point here).
DEV_DIR = "dev"
# RDMA character devices of the fake node carry the numbers of /dev/null: a container that opens
# one gets an empty, harmless device, and the runtime needs a real node to hand in.
HARMLESS_DEVICE = (1, 3)
VFIO_DRIVERS = ("vfio-pci", "uio_pci_generic", "igb_uio")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _symlink(link: Path, target: Path) -> None:
    """Create ``link`` pointing at ``target`` with a relative path, like the kernel's links."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))


class FakeSysfs:
    """The tree under ``root`` for one plan; all writes go through here."""

    def __init__(self, root: Path, plan: NodePlan) -> None:
        self.root = root
        self.plan = plan

    def device_dir(self, bdf: str) -> Path:
        try:
            return self.root / self.plan.device_paths[bdf]
        except KeyError:
            raise ReasonedError(
                "UnknownFakeDevice", f"PCI device {bdf} is not part of the fake node under {self.root}"
            ) from None

    def create(self) -> None:
        for bdf, rel in self.plan.bridge_paths.items():
            self._pci_device(bdf, self.root / rel, "8086", "2030", BRIDGE_CLASS, numa=-1)
        for pf in self.plan.pfs:
            pf_dir = self.device_dir(pf.pci)
            self._pci_device(pf.pci, pf_dir, pf.vendor, pf.device, NET_CLASS, pf.numa)
            _write(pf_dir / "sriov_totalvfs", str(pf.total_vfs))
            _write(pf_dir / "sriov_numvfs", str(len(pf.vfs)))
            self.bind(pf.pci, pf.driver, pf.netdev)
            for vf in pf.vfs:
                vf_dir = self.device_dir(vf.pci)
                self._pci_device(vf.pci, vf_dir, vf.vendor, vf.device, NET_CLASS, vf.numa)
                _symlink(vf_dir / "physfn", pf_dir)
                _symlink(pf_dir / f"virtfn{vf.vf_index}", vf_dir)
                self._rdma_char_devices(vf.rdma_device, vf.uverbs)
                self.bind(vf.pci, vf.driver, vf.netdev, vf.rdma_device)
        for gpu in self.plan.gpus:
            self._pci_device(gpu.pci, self.device_dir(gpu.pci), gpu.vendor, gpu.device, GPU_CLASS, gpu.numa)
            self.bind(gpu.pci, gpu.driver, None)

    def _pci_device(self, bdf: str, path: Path, vendor: str, device: str, cls: str, numa: int) -> None:
        path.mkdir(parents=True, exist_ok=True)
        _write(path / "vendor", f"0x{vendor}")
        _write(path / "device", f"0x{device}")
        _write(path / "class", cls)
        _write(path / "numa_node", str(numa))
        _write(path / "driver_override", "(null)")
        _symlink(self.root / "bus/pci/devices" / bdf, path)

    def _rdma_char_devices(self, rdma_device: str, uverbs: str) -> None:
        """The verbs device naming ``rdma_device`` in sysfs and its node under the device root,
        plus the node-wide rdma_cm (sysfs ``class/misc/rdma_cm`` and its node)."""
        if not rdma_device:
            return
        _write(self.root / "class/infiniband_verbs" / uverbs / "ibdev", rdma_device)
        (self.root / "class/misc/rdma_cm").mkdir(parents=True, exist_ok=True)
        for name in (uverbs, "rdma_cm"):
            _char_device(self.root / DEV_DIR / "infiniband" / name)

    def bind(self, bdf: str, driver: str | None, netdev: str | None, rdma_device: str = "") -> None:
        """Point ``bdf``'s driver link at ``driver`` (None = unbound).

        Only a kernel network driver exposes a netdev and an RDMA device: binding to vfio-pci or
        unbinding hides ``net/<ifname>``, ``class/net/<ifname>`` and ``infiniband/<rdma>`` as the
        kernel does.
        """
        path = self.device_dir(bdf)
        if rdma_device:
            rdma_dir = path / "infiniband" / rdma_device
            if driver is None or driver in VFIO_DRIVERS:
                shutil.rmtree(path / "infiniband", ignore_errors=True)
            else:
                rdma_dir.mkdir(parents=True, exist_ok=True)
        old = path / "driver"
        if old.is_symlink():
            (old.resolve() / bdf).unlink(missing_ok=True)
            old.unlink()
        if driver is not None:
            drv_dir = self.root / "bus/pci/drivers" / driver
            for knob in ("bind", "unbind"):
                if not (drv_dir / knob).exists():
                    _write(drv_dir / knob, "")
            _symlink(old, drv_dir)
            _symlink(drv_dir / bdf, path)
        if netdev is None:
            return
        net_dir = path / "net" / netdev
        class_link = self.root / "class/net" / netdev
        if driver is None or driver in VFIO_DRIVERS:
            shutil.rmtree(net_dir, ignore_errors=True)
            class_link.unlink(missing_ok=True)
            return
        net_dir.mkdir(parents=True, exist_ok=True)
        _write(net_dir / "type", "1")
        if not (net_dir / "operstate").exists():
            self._link_files(net_dir, up=True)
        _symlink(net_dir / "device", path)
        _symlink(class_link, net_dir)

    @staticmethod
    def _link_files(net_dir: Path, *, up: bool) -> None:
        _write(net_dir / "operstate", "up" if up else "down")
        _write(net_dir / "carrier", "1" if up else "0")

    def set_link(self, bdf: str, netdev: str, *, up: bool) -> None:
        """What the kernel shows of a link going down or up: ``operstate`` and ``carrier``."""
        self._link_files(self.device_dir(bdf) / "net" / netdev, up=up)

    def remove_vf(self, pf_bdf: str, vf_bdf: str, vf_index: int) -> None:
        """The VF vanishes from the PCI bus as a hot-unplug shows it: its bus entry and the PF's
        ``virtfn`` link go; its directory stays so :meth:`restore_vf` brings back the same device."""
        (self.root / "bus/pci/devices" / vf_bdf).unlink(missing_ok=True)
        (self.device_dir(pf_bdf) / f"virtfn{vf_index}").unlink(missing_ok=True)

    def restore_vf(self, pf_bdf: str, vf_bdf: str, vf_index: int) -> None:
        _symlink(self.root / "bus/pci/devices" / vf_bdf, self.device_dir(vf_bdf))
        _symlink(self.device_dir(pf_bdf) / f"virtfn{vf_index}", self.device_dir(vf_bdf))

    def driver_of(self, bdf: str) -> str | None:
        link = self.device_dir(bdf) / "driver"
        return link.resolve().name if link.is_symlink() else None


def _char_device(path: Path) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*HARMLESS_DEVICE))
    except PermissionError:
        # Without CAP_MKNOD (an unprivileged unit test) a plain file keeps the layout; only a real
        # runtime, which runs as root here, needs the node itself.
        path.touch()


def remove_tree(root: Path) -> None:
    """Remove everything :class:`FakeSysfs` may have created below ``root``."""
    for entry in OWNED_ENTRIES:
        shutil.rmtree(root / entry, ignore_errors=True)
