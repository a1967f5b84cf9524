"""The driver's repair built in this process over a checkpoint file, as
sriov_dra.app.wiring.managed_service and sriov_dra.app.wiring.repair_service build it on the live
API: for repair passes a test or a benchmark drives itself (its listing timed, counted or made
stale on purpose). Repair needs no
hardware step, so the VFs are stand-ins named by the checkpoint and the sysfs root is empty."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from sriov_dra.advertise.inventory import DeviceState
from sriov_dra.app.wiring import managed_service, repair_service
from sriov_dra.kube.resources import KubePolicySource
from sriov_dra.model import VirtualFunction
from sriov_dra.prepare.host import HostDevices
from sriov_dra.prepare.managed import LiveConsumer
from sriov_dra.recovery.claimrepair import ClaimRepairer
from sriov_dra.recovery.listing import PassLister
from sriov_dra.state.cdi import CdiDir
from sriov_dra.state.checkpoint import FileStorage, PreparedClaims
from sriov_dra.sysfs.vfdriver import SysfsVfDriver


def in_process_service(
    api: client.ApiClient, checkpoint_path: Path, node_name: str, node_uid: str, work: Path
) -> tuple[ClaimRepairer[LiveConsumer], PassLister, PreparedClaims]:
    checkpoint = PreparedClaims(FileStorage(checkpoint_path), str(checkpoint_path))
    inventory = {
        d.device: VirtualFunction(d.device, d.pci_address, "0000:00:00.0", "pf0", 0)
        for r in checkpoint.snapshot_all()
        for d in r.devices
    }
    state = DeviceState(inventory)
    devices = HostDevices(
        node_name=node_name,
        inventory=lambda name: state.lookup(name)[0],
        checkpoint=checkpoint,
        cdi_specs=CdiDir(work),
        vf_driver=SysfsVfDriver(work),
    )
    source = KubePolicySource(api, "default", node_name)
    service = managed_service(
        api,
        node_name=node_name,
        node_uid=node_uid,
        devices=devices,
        checkpoint=checkpoint,
        state=state,
        source=source,
    )
    repairer, lister = repair_service(
        api, service, checkpoint, node_name=node_name, node_uid=node_uid, source=source
    )
    return repairer, lister, checkpoint
