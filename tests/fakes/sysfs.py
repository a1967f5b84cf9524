"""A tiny sysfs-shaped tree for unit tests, with the kernel's layout (dra-driver.md 6.2)."""

import os
from pathlib import Path


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def add_pf(
    root: Path,
    pf: str,
    netdev: str,
    vfs: int,
    *,
    pcie_root: str = "pci0000:16",
    port: str = "0000:16:01.0",
    vf_driver: str = "mlx5_core",
    numa: str = "0",
    link_type: str = "1",
    cls: str = "0x020000",
) -> list[str]:
    """Create a PF with `vfs` VFs (functions 1..n on the PF's bus); returns the VF BDFs."""
    devices = root / "devices" / pcie_root / port
    bus = root / "bus" / "pci" / "devices"
    drivers = root / "bus" / "pci" / "drivers"
    pf_dir = devices / pf
    for key, value in {
        "class": cls,
        "vendor": "0x15b3",
        "device": "0x1017",
        "numa_node": numa,
        "sriov_totalvfs": "8",
        "sriov_numvfs": str(vfs),
    }.items():
        _write(pf_dir / key, value + "\n")
    (pf_dir / "net" / netdev).mkdir(parents=True)
    _link(bus / pf, f"../../../devices/{pcie_root}/{port}/{pf}")
    _write(root / "class" / "net" / netdev / "type", link_type + "\n")
    out = []
    dom, b, _ = pf.split(":")
    for i in range(vfs):
        vf = f"{dom}:{b}:00.{i + 1}"
        vf_dir = devices / vf
        for key, value in {"class": cls, "vendor": "0x15b3", "device": "0x1018", "numa_node": numa}.items():
            _write(vf_dir / key, value + "\n")
        _link(vf_dir / "physfn", f"../{pf}")
        _link(pf_dir / f"virtfn{i}", f"../{vf}")
        _link(bus / vf, f"../../../devices/{pcie_root}/{port}/{vf}")
        (drivers / vf_driver).mkdir(parents=True, exist_ok=True)
        _link(vf_dir / "driver", f"../../../../bus/pci/drivers/{vf_driver}")
        _write(vf_dir / "driver_override", "\n")
        if vf_driver != "vfio-pci":
            (vf_dir / "net" / f"{netdev}v{i}").mkdir(parents=True)
        out.append(vf)
    return out


def add_rdma(root: Path, vf: str, name: str, uverbs: str | None, *, rdma_cm: bool = True) -> None:
    """Give a VF an RDMA device `name`, a verbs device `uverbs` naming it, and the node rdma_cm."""
    (root / "bus" / "pci" / "devices" / vf / "infiniband" / name).mkdir(parents=True)
    if uverbs:
        _write(root / "class" / "infiniband_verbs" / uverbs / "ibdev", name + "\n")
    if rdma_cm:
        (root / "class" / "misc" / "rdma_cm").mkdir(parents=True, exist_ok=True)
