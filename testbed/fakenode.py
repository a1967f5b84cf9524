"""A simulated SR-IOV node: real veth PFs/VFs plus a sysfs-shaped tree, created and removed for real.

Every PF and VF is one end of a veth pair whose other end sits on a per-PF bridge inside a private
"wire" network namespace, so VF ends can move into container namespaces and still reach each
other like VFs on one embedded switch. Deleting the wire namespace destroys every pair wherever its
VF end lives, which is what makes teardown complete even after a crash.

Run as ``python -m testbed.fakenode up|down|status`` (or ``scripts/fake-sriov-node``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import yaml
from pyroute2 import IPRoute, NetNS, netns

from sriov_contract.errors import ReasonedError
from testbed.fakesysfs import DEV_DIR, OWNED_ENTRIES, FakeSysfs, remove_tree
from testbed.sriov_topology import (
    GpuRecord,
    NetFunction,
    NodePlan,
    PfRecord,
    VfRecord,
    parse_topology,
    plan_node,
)

STATE_FILE = "fakenode.json"
SYSFS_ENV = "SRIOV_SYSFS_ROOT"
_SETTLE_SECONDS = 5.0
# Spec 14.2's node: two PCIe roots, one rail PF and one GPU under each.
TWO_RAIL = Path(__file__).resolve().parents[1] / "fixtures/topologies/two-rail.yaml"


def load_topology_file(path: Path) -> dict[str, Any]:
    """Read a YAML or JSON topology document (JSON is valid YAML)."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ReasonedError("InvalidTopology", f"cannot read topology file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ReasonedError("InvalidTopology", f"topology file {path} must hold a mapping")
    return data


def load_two_rail() -> dict[str, Any]:
    return load_topology_file(TWO_RAIL)


def load_two_rail_rdma() -> dict[str, Any]:
    """The two-rail node with RDMA on rail-a's PF only (the demo's): some VFs have an RDMA
    device, others none."""
    doc = load_two_rail()
    doc["roots"][0]["pfs"][0]["rdma"] = True
    return doc


def _host_links(prefix: str) -> list[tuple[int, str]]:
    with IPRoute() as ipr:
        return [
            (link["index"], name)
            for link in ipr.get_links()
            if (name := link.get("ifname") or "").startswith(prefix)
        ]


def _netns_names() -> set[str]:
    return set(netns.listnetns())


def _choose_prefix() -> str:
    taken = {name for _, name in _host_links("f")}
    for _ in range(64):
        prefix = "f" + secrets.token_hex(2)[:3]
        if not any(n.startswith(prefix) for n in taken) and f"fakesriov-{prefix}" not in _netns_names():
            return prefix
    raise ReasonedError(
        "FakeNodePrefixExhausted", "no free run prefix; run 'fake-sriov-node down' on old runs"
    )


def _wire_ends(plan: NodePlan) -> list[tuple[str, str, str, str, bool]]:
    """(bridge, wire peer, host name, MAC, up) for every PF and VF; peer names are stable per plan."""
    ends = []
    for pf_no, pf in enumerate(plan.pfs):
        bridge = f"br{pf_no}"
        ends.append((bridge, f"p{pf_no}", pf.netdev, pf.mac, True))
        ends.extend((bridge, f"v{pf_no}x{vf.vf_index}", vf.netdev, vf.mac, False) for vf in pf.vfs)
    return ends


def _add_pair(host: Any, wire: Any, plan: NodePlan, end: tuple[str, str, str, str, bool]) -> None:
    bridge, peer_name, name, mac, up = end
    host.link(
        "add", ifname=name, kind="veth", address=mac, peer={"ifname": peer_name, "net_ns_fd": plan.wire_netns}
    )
    peer_index = wire.link_lookup(ifname=peer_name)[0]
    wire.link("set", index=peer_index, master=wire.link_lookup(ifname=bridge)[0], state="up")
    if up:
        host.link("set", index=host.link_lookup(ifname=name)[0], state="up")


def _create_links(plan: NodePlan) -> None:
    netns.create(plan.wire_netns)
    with IPRoute() as host, NetNS(plan.wire_netns) as wire:
        wire.link("set", index=1, state="up")
        for pf_no in range(len(plan.pfs)):
            wire.link("add", ifname=f"br{pf_no}", kind="bridge")
            wire.link("set", index=wire.link_lookup(ifname=f"br{pf_no}")[0], state="up")
        for end in _wire_ends(plan):
            _add_pair(host, wire, plan, end)


def _lost_ends(wire: Any, plan: NodePlan) -> list[tuple[str, str, str, str, bool]]:
    # A veth pair dies with the namespace its VF end was in (a real VF would fall back to the
    # host instead); a missing wire peer is exactly a destroyed pair.
    return [end for end in _wire_ends(plan) if not wire.link_lookup(ifname=end[1])]


def _heal_links(plan: NodePlan) -> list[str]:
    with IPRoute() as host, NetNS(plan.wire_netns) as wire:
        lost = _lost_ends(wire, plan)
        for end in lost:
            _add_pair(host, wire, plan, end)
    return [end[2] for end in lost]


def _delete_links(prefix: str, wire_netns: str) -> None:
    if wire_netns in _netns_names():
        netns.remove(wire_netns)
    # Removing the wire namespace destroys the veth pairs asynchronously; wait for that, then
    # delete whatever a crash left in the host namespace without a peer behind.
    deadline = time.monotonic() + _SETTLE_SECONDS
    while _host_links(prefix) and time.monotonic() < deadline:
        time.sleep(0.05)
    with IPRoute() as ipr:
        for index, _ in _host_links(prefix):
            with contextlib.suppress(Exception):
                ipr.link("del", index=index)


@dataclasses.dataclass
class FakeNode:
    """A running fake node. Create with :meth:`up`, remove with :meth:`down`."""

    sysfs_root: Path
    plan: NodePlan
    created_root: bool

    @property
    def prefix(self) -> str:
        return self.plan.prefix

    @property
    def wire_netns(self) -> str:
        return self.plan.wire_netns

    @property
    def pfs(self) -> tuple[PfRecord, ...]:
        return self.plan.pfs

    @property
    def vfs(self) -> tuple[VfRecord, ...]:
        return self.plan.vfs

    @property
    def gpus(self) -> tuple[GpuRecord, ...]:
        return self.plan.gpus

    @property
    def dev_root(self) -> Path:
        """The node's device root (its /dev): the driver's DEV_ROOT, where RDMA nodes live."""
        return self.sysfs_root / DEV_DIR

    @property
    def sysfs(self) -> FakeSysfs:
        return FakeSysfs(self.sysfs_root, self.plan)

    def env(self) -> dict[str, str]:
        """Environment that points the sriov test plugin at this node's sysfs tree."""
        return {SYSFS_ENV: str(self.sysfs_root)}

    def vf(self, pci: str) -> VfRecord:
        for vf in self.vfs:
            if vf.pci == pci:
                return vf
        raise ReasonedError("UnknownFakeDevice", f"VF {pci} is not part of fake node {self.prefix}")

    def rail_vfs(self, rail: str) -> list[VfRecord]:
        return [vf for vf in self.vfs if vf.rail == rail]

    def bind(self, pci: str, driver: str | None) -> None:
        """Simulate binding a VF/PF to ``driver`` (e.g. "vfio-pci", its netdev driver, or None)."""
        devices: list[NetFunction] = [*self.pfs, *self.vfs]
        netdev = next((d.netdev for d in devices if d.pci == pci), None)
        rdma = next((vf.rdma_device for vf in self.vfs if vf.pci == pci), "")
        self.sysfs.bind(pci, driver, netdev, rdma)

    def driver_of(self, pci: str) -> str | None:
        return self.sysfs.driver_of(pci)

    def pf_of(self, vf_pci: str) -> PfRecord:
        return next(pf for pf in self.pfs if any(vf.pci == vf_pci for vf in pf.vfs))

    def set_pf_link(self, pf_netdev: str, *, up: bool) -> None:
        """Take a PF's link down or up: its host veth (what a CNI on the host sees) and the
        ``operstate``/``carrier`` files the driver reads (the fake sysfs is not the kernel's)."""
        pf = next((p for p in self.pfs if p.netdev == pf_netdev), None)
        if pf is None:
            raise ReasonedError("UnknownFakeDevice", f"PF {pf_netdev} is not part of fake node {self.prefix}")
        with IPRoute() as host:
            index = host.link_lookup(ifname=pf_netdev)
            if index:
                host.link("set", index=index[0], state="up" if up else "down")
        self.sysfs.set_link(pf.pci, pf.netdev, up=up)

    def remove_vf(self, pci: str) -> None:
        """The VF vanishes from sysfs (a hot-unplug, or its PF's sriov_numvfs lowered)."""
        self.sysfs.remove_vf(self.pf_of(pci).pci, pci, self.vf(pci).vf_index)

    def restore_vf(self, pci: str) -> None:
        self.sysfs.restore_vf(self.pf_of(pci).pci, pci, self.vf(pci).vf_index)

    @classmethod
    def up(cls, topology: Mapping[str, Any], sysfs_root: Path, prefix: str | None = None) -> FakeNode:
        """Create the node described by ``topology`` (a decoded topology document)."""
        plan = plan_node(parse_topology(topology), prefix or _choose_prefix())
        created_root = not sysfs_root.exists()
        sysfs_root.mkdir(parents=True, exist_ok=True)
        if (sysfs_root / STATE_FILE).exists() or any((sysfs_root / e).exists() for e in OWNED_ENTRIES):
            raise ReasonedError(
                "FakeNodeExists",
                f"{sysfs_root} already holds a fake node; run 'fake-sriov-node down --sysfs-root {sysfs_root}'",
            )
        # Record ownership before creating anything so a crash at any point can be undone.
        state = {
            "prefix": plan.prefix,
            "wireNetns": plan.wire_netns,
            "createdRoot": created_root,
            "topology": dict(topology),
            "pid": os.getpid(),
        }
        (sysfs_root / STATE_FILE).write_text(json.dumps(state, indent=2))
        node = cls(sysfs_root, plan, created_root)
        try:
            _create_links(plan)
            node.sysfs.create()
        except BaseException:
            teardown(sysfs_root)
            raise
        return node

    @classmethod
    def attach(cls, sysfs_root: Path) -> FakeNode:
        """Re-open a node another process created, from its state file."""
        state = _read_state(sysfs_root)
        if state is None:
            raise ReasonedError("FakeNodeMissing", f"no fake node state under {sysfs_root}; run 'up' first")
        plan = plan_node(parse_topology(state["topology"]), state["prefix"])
        return cls(sysfs_root, plan, bool(state["createdRoot"]))

    def down(self) -> None:
        teardown(self.sysfs_root)

    def heal(self) -> list[str]:
        """Bring back, in the host netns with original name and MAC, every PF/VF whose veth pair
        died with a deleted container netns (a real VF returns to the host). Returns their names.
        """
        return _heal_links(self.plan)

    def lost(self) -> list[str]:
        """PF/VF names whose veth pair is gone (namespace deletion finishes asynchronously)."""
        with NetNS(self.wire_netns) as wire:
            return [end[2] for end in _lost_ends(wire, self.plan)]

    def status(self) -> dict[str, Any]:
        present = {name for _, name in _host_links(self.prefix)}
        return {
            "prefix": self.prefix,
            "sysfsRoot": str(self.sysfs_root),
            "wireNetns": self.wire_netns,
            "wireNetnsPresent": self.wire_netns in _netns_names(),
            "pfs": [{**_record(pf, exclude="vfs"), "present": pf.netdev in present} for pf in self.pfs],
            "vfs": [
                {**_record(vf), "present": vf.netdev in present, "boundTo": self.driver_of(vf.pci)}
                for vf in self.vfs
            ],
            "gpus": [_record(g) for g in self.gpus],
        }


def _record(obj: Any, exclude: str = "") -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(obj).items() if k != exclude}


def _read_state(sysfs_root: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((sysfs_root / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ReasonedError(
            "CorruptFakeNodeState",
            f"cannot read {sysfs_root / STATE_FILE}: {exc}; remove it and sweep with --prefix",
        ) from None
    return data


def teardown(sysfs_root: Path, prefix: str | None = None) -> None:
    """Remove every link, namespace and file a fake node made; safe to repeat and after a crash.

    ``prefix`` sweeps a run whose state file is gone.
    """
    state = _read_state(sysfs_root)
    if state is not None:
        prefix = state["prefix"]
    if prefix:
        _delete_links(prefix, f"fakesriov-{prefix}")
    remove_tree(sysfs_root)
    (sysfs_root / STATE_FILE).unlink(missing_ok=True)
    if state is not None and state.get("createdRoot"):
        with contextlib.suppress(OSError):
            sysfs_root.rmdir()


@contextlib.contextmanager
def fake_node(topology: Mapping[str, Any], sysfs_root: Path) -> Iterator[FakeNode]:
    node = FakeNode.up(topology, sysfs_root)
    try:
        yield node
    finally:
        node.down()


@click.group()
def cli() -> None:
    """Create, inspect and remove a simulated SR-IOV node."""


@cli.command()
@click.option("--topology", "topology_file", type=click.Path(exists=True, path_type=Path), required=True)
@click.option("--sysfs-root", type=click.Path(path_type=Path), required=True)
@click.option("--prefix", default=None, help="Run prefix for interface names (default: random).")
def up(topology_file: Path, sysfs_root: Path, prefix: str | None) -> None:
    """Create the node and print its status as JSON."""
    node = FakeNode.up(load_topology_file(topology_file), sysfs_root, prefix)
    click.echo(json.dumps(node.status(), indent=2))


@cli.command()
@click.option("--sysfs-root", type=click.Path(path_type=Path), required=True)
@click.option("--prefix", default=None, help="Also sweep links of this run prefix (state file lost).")
def down(sysfs_root: Path, prefix: str | None) -> None:
    """Remove the node; idempotent."""
    teardown(sysfs_root, prefix)


@cli.command()
@click.option("--sysfs-root", type=click.Path(path_type=Path), required=True)
def heal(sysfs_root: Path) -> None:
    """Recreate VFs lost with a deleted container netns; prints their names."""
    for name in FakeNode.attach(sysfs_root).heal():
        click.echo(name)


@cli.command()
@click.option("--sysfs-root", type=click.Path(path_type=Path), required=True)
def status(sysfs_root: Path) -> None:
    """Print what the node has and which of its links exist."""
    click.echo(json.dumps(FakeNode.attach(sysfs_root).status(), indent=2))


@cli.command()
@click.option("--sysfs-root", type=click.Path(path_type=Path), required=True)
@click.argument("pf")
@click.argument("state", type=click.Choice(["up", "down"]))
def link(sysfs_root: Path, pf: str, state: str) -> None:
    """Take PF (its netdev name) link up or down, as a cable pull would."""
    FakeNode.attach(sysfs_root).set_pf_link(pf, up=state == "up")


@cli.command()
@click.option("--sysfs-root", type=click.Path(path_type=Path), required=True)
@click.argument("pci")
@click.argument("action", type=click.Choice(["remove", "restore"]))
def vf(sysfs_root: Path, pci: str, action: str) -> None:
    """Make VF PCI vanish from sysfs, or bring it back."""
    node = FakeNode.attach(sysfs_root)
    (node.remove_vf if action == "remove" else node.restore_vf)(pci)


def main() -> None:
    try:
        cli(standalone_mode=False)
    except ReasonedError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
