"""Topology of a simulated SR-IOV node: parse a spec and plan every name, address and sysfs path.

Pure and deterministic: given a spec and a run prefix it returns the same plan, so the executor in
``testbed.fakenode`` and its crash recovery agree on exactly what a run owns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sriov_contract.errors import ReasonedError

IFNAMSIZ = 15
GPU_CLASS = "0x030200"
NET_CLASS = "0x020000"
BRIDGE_CLASS = "0x060400"


def _topology_error(message: str) -> ReasonedError:
    return ReasonedError("InvalidTopology", message)


@dataclass(frozen=True)
class PfSpec:
    name: str
    bdf: str
    vendor: str
    device: str
    vf_device: str
    driver: str
    num_vfs: int
    total_vfs: int
    first_vf_offset: int
    rail: str
    subnet: str
    rdma: bool = False


@dataclass(frozen=True)
class GpuSpec:
    name: str
    bdf: str
    vendor: str
    device: str
    driver: str


@dataclass(frozen=True)
class RootSpec:
    domain_bus: str
    numa: int
    pfs: tuple[PfSpec, ...]
    gpus: tuple[GpuSpec, ...]


@dataclass(frozen=True)
class Topology:
    name: str
    roots: tuple[RootSpec, ...]


@dataclass(frozen=True)
class PciFunction:
    """What every simulated device has: its address, the root and NUMA node it sits under, its
    IDs and the driver bound at start."""

    pci: str
    pcie_root: str
    numa: int
    vendor: str
    device: str
    driver: str


@dataclass(frozen=True)
class NetFunction(PciFunction):
    """What a PF and a VF share: a network function with a netdev on a rail."""

    netdev: str
    mac: str
    rail: str
    subnet: str


@dataclass(frozen=True)
class VfRecord(NetFunction):
    """One simulated VF, as tests and the DRA driver's discovery see it."""

    pf: str
    pf_pci: str
    vf_index: int
    # The VF's RDMA device and verbs character device ("" when its PF has no RDMA): names are
    # numbered across the node as the kernel does (mlx5_0, mlx5_1, ...; uverbs0, uverbs1, ...).
    rdma_device: str = ""
    uverbs: str = ""


@dataclass(frozen=True)
class PfRecord(NetFunction):
    total_vfs: int
    vfs: tuple[VfRecord, ...]


@dataclass(frozen=True)
class GpuRecord(PciFunction):
    name: str


@dataclass(frozen=True)
class NodePlan:
    prefix: str
    wire_netns: str
    pfs: tuple[PfRecord, ...]
    gpus: tuple[GpuRecord, ...]
    # BDF -> sysfs path below the root ("devices/pci0000:16/0000:16:01.0/0000:17:00.0").
    device_paths: Mapping[str, str]
    # Root-port BDF -> path: the upstream bridge each endpoint hangs off.
    bridge_paths: Mapping[str, str]

    @property
    def vfs(self) -> tuple[VfRecord, ...]:
        return tuple(vf for pf in self.pfs for vf in pf.vfs)

    def link_names(self) -> tuple[str, ...]:
        return tuple(pf.netdev for pf in self.pfs) + tuple(vf.netdev for vf in self.vfs)


def _field(obj: Mapping[str, Any], key: str, where: str, default: Any = None) -> Any:
    value = obj.get(key, default)
    if value is None:
        raise _topology_error(f"{where} needs '{key}'; add it to the topology file")
    return value


def _hex_id(value: Any, where: str) -> str:
    text = str(value).lower().removeprefix("0x")
    try:
        int(text, 16)
    except ValueError:
        raise _topology_error(f"{where}: {value!r} is not a hexadecimal PCI id") from None
    return text.zfill(4)


def parse_bdf(bdf: str) -> tuple[int, int, int, int]:
    """Split ``DDDD:BB:dd.f`` into integers, refusing anything else."""
    try:
        domain, bus, rest = bdf.split(":")
        dev, fn = rest.split(".")
        parts = (int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16))
    except ValueError:
        raise _topology_error(f"PCI address {bdf!r} is not in DDDD:BB:dd.f form") from None
    if len(domain) != 4 or len(bus) != 2 or len(dev) != 2 or len(fn) != 1 or parts[3] > 7 or parts[2] > 31:
        raise _topology_error(f"PCI address {bdf!r} is not in DDDD:BB:dd.f form")
    return parts


def format_bdf(domain: int, bus: int, dev: int, fn: int) -> str:
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn:x}"


def _parse_pf(raw: Mapping[str, Any], where: str) -> PfSpec:
    name = str(_field(raw, "name", where))
    where = f"{where} PF {name}"
    bdf = str(_field(raw, "bdf", where))
    parse_bdf(bdf)
    num_vfs = int(raw.get("vfs", 4))
    total_vfs = int(raw.get("totalVfs", max(num_vfs, 8)))
    if not 0 <= num_vfs <= total_vfs:
        raise _topology_error(f"{where}: vfs={num_vfs} must be between 0 and totalVfs={total_vfs}")
    return PfSpec(
        name=name,
        bdf=bdf,
        vendor=_hex_id(raw.get("vendor", "15b3"), where),
        device=_hex_id(raw.get("device", "1017"), where),
        vf_device=_hex_id(raw.get("vfDevice", "1018"), where),
        driver=str(raw.get("driver", "mlx5_core")),
        num_vfs=num_vfs,
        total_vfs=total_vfs,
        first_vf_offset=int(raw.get("firstVfOffset", 2)),
        rail=str(raw.get("rail", name)),
        subnet=str(raw.get("subnet", "")),
        rdma=bool(raw.get("rdma", False)),
    )


def _parse_gpu(raw: Mapping[str, Any], where: str) -> GpuSpec:
    bdf = str(_field(raw, "bdf", where + " GPU"))
    parse_bdf(bdf)
    where = f"{where} GPU {bdf}"
    return GpuSpec(
        name=str(raw.get("name", bdf)),
        bdf=bdf,
        vendor=_hex_id(raw.get("vendor", "10de"), where),
        device=_hex_id(raw.get("device", "2330"), where),
        driver=str(raw.get("driver", "nvidia")),
    )


def parse_topology(data: Mapping[str, Any]) -> Topology:
    """Validate a topology document (already decoded from YAML or JSON)."""
    roots_raw = data.get("roots")
    if not isinstance(roots_raw, Sequence) or not roots_raw:
        raise _topology_error("a topology needs a non-empty 'roots' list")
    roots = []
    for raw in roots_raw:
        where = "root"
        domain_bus = str(_field(raw, "root", where))
        where = f"root {domain_bus}"
        try:
            domain, bus = (int(p, 16) for p in domain_bus.split(":"))
        except ValueError:
            raise _topology_error(f"{where}: 'root' must look like 0000:16") from None
        pfs = tuple(_parse_pf(p, where) for p in raw.get("pfs", ()))
        gpus = tuple(_parse_gpu(g, where) for g in raw.get("gpus", ()))
        roots.append(RootSpec(f"{domain:04x}:{bus:02x}", int(raw.get("numa", -1)), pfs, gpus))
    topology = Topology(str(data.get("name", "fake-node")), tuple(roots))
    _check_unique(topology)
    return topology


def _check_unique(topology: Topology) -> None:
    seen: set[str] = set()
    names: set[str] = set()
    for root in topology.roots:
        for pf in root.pfs:
            if pf.name in names:
                raise _topology_error(f"PF name {pf.name} appears twice; PF names must be unique")
            names.add(pf.name)
        for bdf in [pf.bdf for pf in root.pfs] + [g.bdf for g in root.gpus]:
            if bdf in seen:
                raise _topology_error(f"PCI address {bdf} appears twice; every device needs its own")
            seen.add(bdf)


def _mac(prefix: str, bdf: str) -> str:
    # Locally administered unicast, stable per (run, device) so DEL can prove the MAC came back.
    digest = hashlib.sha256(f"{prefix}/{bdf}".encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def vf_bdf(pf_bdf: str, offset: int) -> str:
    domain, bus, dev, fn = parse_bdf(pf_bdf)
    routing_id = (dev << 3 | fn) + offset
    if routing_id > 0xFF:
        raise _topology_error(f"PF {pf_bdf} has too many VFs to fit on bus {bus:02x}")
    return format_bdf(domain, bus, routing_id >> 3, routing_id & 7)


def plan_node(topology: Topology, prefix: str) -> NodePlan:
    """Assign netdev names, VF addresses, MACs and sysfs paths for one run."""
    pfs: list[PfRecord] = []
    gpus: list[GpuRecord] = []
    device_paths: dict[str, str] = {}
    bridge_paths: dict[str, str] = {}
    rdma_count = 0
    for root in topology.roots:
        root_dir = f"pci{root.domain_bus}"
        pcie_root = root_dir
        endpoints: list[str] = [pf.bdf for pf in root.pfs] + [g.bdf for g in root.gpus]
        for port, bdf in enumerate(endpoints, start=1):
            bridge = f"{root.domain_bus}:{port:02x}.0"
            bridge_paths[bridge] = f"devices/{root_dir}/{bridge}"
            device_paths[bdf] = f"devices/{root_dir}/{bridge}/{bdf}"
        for pf in root.pfs:
            pf_path = device_paths[pf.bdf]
            bridge_path = pf_path.rsplit("/", 1)[0]
            vfs = []
            for index in range(pf.num_vfs):
                bdf = vf_bdf(pf.bdf, pf.first_vf_offset + index)
                if bdf in device_paths:
                    raise _topology_error(f"VF {index} of PF {pf.name} would reuse PCI address {bdf}")
                device_paths[bdf] = f"{bridge_path}/{bdf}"
                rdma = ("", "")
                if pf.rdma:
                    rdma = (f"mlx5_{rdma_count}", f"uverbs{rdma_count}")
                    rdma_count += 1
                vfs.append(
                    VfRecord(
                        pci=bdf,
                        pf=prefix + pf.name,
                        pf_pci=pf.bdf,
                        vf_index=index,
                        netdev=f"{prefix}{pf.name}v{index}",
                        mac=_mac(prefix, bdf),
                        pcie_root=pcie_root,
                        numa=root.numa,
                        rail=pf.rail,
                        subnet=pf.subnet,
                        vendor=pf.vendor,
                        device=pf.vf_device,
                        driver=pf.driver,
                        rdma_device=rdma[0],
                        uverbs=rdma[1],
                    )
                )
            pfs.append(
                PfRecord(
                    pci=pf.bdf,
                    netdev=prefix + pf.name,
                    mac=_mac(prefix, pf.bdf),
                    pcie_root=pcie_root,
                    numa=root.numa,
                    rail=pf.rail,
                    subnet=pf.subnet,
                    vendor=pf.vendor,
                    device=pf.device,
                    driver=pf.driver,
                    total_vfs=pf.total_vfs,
                    vfs=tuple(vfs),
                )
            )
        gpus.extend(
            GpuRecord(g.bdf, pcie_root, root.numa, g.vendor, g.device, g.driver, g.name) for g in root.gpus
        )
    plan = NodePlan(prefix, f"fakesriov-{prefix}", tuple(pfs), tuple(gpus), device_paths, bridge_paths)
    too_long = [n for n in plan.link_names() if len(n.encode()) > IFNAMSIZ]
    if too_long:
        raise _topology_error(
            f"interface names {too_long} exceed {IFNAMSIZ} bytes; shorten the PF names or the run prefix"
        )
    return plan
