"""The driver's vocabulary: its name, the device attributes it publishes, and the VF record every flow uses.

Attribute names and meanings follow the upstream SR-IOV DRA driver, so CEL selectors and Multus
keep working unchanged. One home for them (like upstream's consts package), kept narrow: records
and keys only, no behaviour beyond their JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from sriov_contract.keys import DOMAIN

# As upstream, the DRA driver name, the group of its policy API and the contract's annotation
# domain are one string.
DRIVER_NAME: Final = DOMAIN
POLICY_GROUP: Final = DOMAIN
POLICY_VERSION: Final = "v1alpha1"
NAD_GROUP: Final = "k8s.cni.cncf.io"
DRA_GROUP: Final = "resource.k8s.io"
DRA_VERSION: Final = "v1"

ATTR_VENDOR = f"{DRIVER_NAME}/vendor"
ATTR_DEVICE_ID = f"{DRIVER_NAME}/deviceID"
ATTR_PF_DEVICE_ID = f"{DRIVER_NAME}/pfDeviceID"
ATTR_PCI_ADDRESS = f"{DRIVER_NAME}/pciAddress"
ATTR_MULTUS_DEVICE_ID = "k8s.cni.cncf.io/deviceID"
ATTR_PF_NAME = f"{DRIVER_NAME}/PFName"
ATTR_ESWITCH_MODE = f"{DRIVER_NAME}/EswitchMode"
ATTR_VF_ID = f"{DRIVER_NAME}/vfID"
ATTR_PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
ATTR_PF_PCI_ADDRESS = f"{DRIVER_NAME}/pfPciAddress"
ATTR_PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
ATTR_LINK_TYPE = f"{DRIVER_NAME}/linkType"
ATTR_RDMA_CAPABLE = f"{DRIVER_NAME}/rdmaCapable"
ATTR_NUMA_NODE = "dra.net/numaNode"

# Hardware identity a policy may never override: these come from discovery only.
RESERVED_ATTRIBUTES = frozenset(
    {
        ATTR_VENDOR,
        ATTR_DEVICE_ID,
        ATTR_PF_DEVICE_ID,
        ATTR_PCI_ADDRESS,
        ATTR_MULTUS_DEVICE_ID,
        ATTR_PF_NAME,
        ATTR_ESWITCH_MODE,
        ATTR_VF_ID,
        ATTR_PCIE_ROOT,
        ATTR_PF_PCI_ADDRESS,
        ATTR_PCI_BUS_ID,
        ATTR_LINK_TYPE,
        ATTR_RDMA_CAPABLE,
        ATTR_NUMA_NODE,
    }
)

# Userspace (DPDK) drivers: a VF bound to one of these has no kernel netdevice by design.
USERSPACE_DRIVERS = frozenset({"vfio-pci", "uio_pci_generic", "igb_uio"})

AttributeValue = str | int | bool
# A ResourceSlice DeviceAttribute as JSON: exactly one typed member, e.g. {"string": "ens1f0"}.
TypedAttribute = dict[str, object]


@dataclass(frozen=True)
class RdmaDevice:
    """The RDMA side of a kernel-bound VF, as sysfs names it.

    `name` is the kernel's RDMA device (``<vf>/infiniband/<name>``, e.g. ``mlx5_3``); `uverbs` the
    verbs character device whose ``ibdev`` names it (``uverbs3``, i.e. ``/dev/infiniband/uverbs3``),
    None when the verbs module is not loaded; `rdma_cm` whether the node has the connection manager
    device (``/dev/infiniband/rdma_cm``, one for the whole node).
    """

    name: str
    uverbs: str | None = None
    rdma_cm: bool = False


@dataclass(frozen=True)
class VirtualFunction:
    """One VF and its published attributes."""

    name: str
    pci_address: str
    pf_pci_address: str
    pf_name: str
    vf_id: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    # Node-local names, kept in the inventory but never published (docs/node-agent.md says why).
    rdma: RdmaDevice | None = None


def typed_attribute(value: AttributeValue) -> TypedAttribute:
    """The DeviceAttribute JSON form of a discovered value."""
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": value}


def device_name(bdf: str) -> str:
    """The ResourceSlice device name of a PCI address (DNS label: ``:`` and ``.`` become ``-``)."""
    return bdf.replace(":", "-").replace(".", "-")
