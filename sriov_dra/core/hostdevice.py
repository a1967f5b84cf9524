"""What the checkpoint records for one VF handed to a claim, decided without touching the VF (pure).

sriov_dra.prepare.host binds the VF and checks it before calling this; a record rebuilt from the
API after a damaged checkpoint (sriov_dra.core.rebuild) goes through the same function, so the two
can never disagree on the environment, the device nodes or the CDI device IDs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sriov_dra.core.cdinames import claim_device_id, env_name, pod_device_id
from sriov_dra.core.claimrecord import PreparedDevice
from sriov_dra.core.vfconfig import VfConfig
from sriov_dra.model import RdmaDevice

VFIO_DRIVER = "vfio-pci"
RDMA_DEV_DIR = "/dev/infiniband"


def vf_config_json(config: VfConfig) -> dict[str, Any]:
    """Upstream's VfConfig JSON (empty fields omitted), as recorded in the checkpoint."""
    out: dict[str, Any] = {
        "driver": config.driver,
        "addVhostMount": config.add_vhost_mount,
        "ifName": config.if_name,
        "netAttachDefName": config.net_attach_def_name,
        "netAttachDefNamespace": config.net_attach_def_namespace,
    }
    return {k: v for k, v in out.items() if v}


def rdma_edits(infix: str, rdma: RdmaDevice, env: dict[str, str]) -> list[str]:
    """The device nodes of an RDMA device, adding to `env` the variables that name them.

    The variable names are the ones the upstream driver sets, so a container finds its RDMA device
    the same way under either driver.
    """
    env[f"SRIOVNETWORK_{infix}_RDMA_DEVICE"] = rdma.name
    nodes = []
    if rdma.uverbs:
        nodes.append(f"{RDMA_DEV_DIR}/{rdma.uverbs}")
        env[f"SRIOVNETWORK_{infix}_RDMA_UVERB"] = nodes[-1]
    if rdma.rdma_cm:
        nodes.append(f"{RDMA_DEV_DIR}/rdma_cm")
        env[f"SRIOVNETWORK_{infix}_RDMA_CM"] = nodes[-1]
    return nodes


def prepared_device(
    *,
    claim_uid: str,
    pod_uid: str,
    request: str,
    pool: str,
    name: str,
    pci_address: str,
    config: VfConfig,
    original_driver: str,
    binding: Mapping[str, Any] | None,
    iommu_group: str | None = None,
    rdma: RdmaDevice | None = None,
) -> PreparedDevice:
    """The record of one prepared VF; `iommu_group` is required (and only read) for vfio-pci;
    `rdma` is the VF's RDMA device as bound now (None without one: not an error)."""
    infix = env_name(name)
    env = {
        f"SRIOVNETWORK_VF_DEVICE_{infix}": pci_address,
        "SRIOVNETWORK_NET_ATTACH_DEF_NAME": config.net_attach_def_name,
    }
    nodes: list[str] = []
    if config.driver == VFIO_DRIVER:
        nodes = [f"/dev/vfio/{iommu_group}", "/dev/vfio/vfio"]
        env[f"SRIOVNETWORK_{infix}_VFIO_DEVICE"] = nodes[0]
    if config.add_vhost_mount:
        nodes += ["/dev/vhost-net", "/dev/net/tun"]
    if rdma is not None:
        nodes += rdma_edits(infix, rdma, env)
    return PreparedDevice(
        request_names=(request.split("/", 1)[0],),
        pool=pool,
        device=name,
        pci_address=pci_address,
        cdi_device_ids=(claim_device_id(claim_uid, name), pod_device_id(pod_uid)),
        original_driver=original_driver,
        config=vf_config_json(config),
        if_name=config.if_name,
        env=env,
        device_nodes=tuple(nodes),
        managed_binding=binding,
    )
