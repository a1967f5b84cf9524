"""The device-info annotation a generated shadow NAD may carry: what the driver discovered about the
bound VF, for Multus-style device-info (spec 10.4).

The driver writes it once at Create beside the binding, from its own discovery, and never changes
it; the CNI shim reads it from the shadow it already fetched and checked (no second lookup) and
publishes it as the interface's network-status ``device-info`` and CNIDeviceInfoFile. A shadow
without it is valid (older drivers write none); the shim then reports no device-info.
"""

from __future__ import annotations

from sriov_contract.document import (
    check_fields,
    check_version,
    compact,
    get_str,
    load_object,
    require_version,
)
from sriov_contract.keys import DEVICE_INFO_ANNOTATION
from sriov_contract.names import validate_pci_address, validate_rdma_device
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Final

    from sriov_contract.document import JSONObject

DEVICE_INFO_VERSION: Final = 1
FIELDS: Final = ("version", "pciAddress", "pfPciAddress", "rdmaDevice")
_WHAT: Final = f"annotation {DEVICE_INFO_ANNOTATION}"


class DeviceInfo(TypedTuple):
    version: int
    pci_address: str
    pf_pci_address: str
    rdma_device: str
    """The discovered RDMA device name; "" when the VF has none (never the rdmaCapable boolean)."""

    def __post_init__(self) -> None:
        require_version(self.version, _WHAT, "version", DEVICE_INFO_VERSION)
        validate_pci_address(self.pci_address, "pciAddress")
        validate_pci_address(self.pf_pci_address, "pfPciAddress")
        validate_rdma_device(self.rdma_device, "rdmaDevice")

    def to_dict(self) -> JSONObject:
        return {
            "version": self.version,
            "pciAddress": self.pci_address,
            "pfPciAddress": self.pf_pci_address,
            "rdmaDevice": self.rdma_device,
        }

    def to_json(self) -> str:
        return compact(self.to_dict())


def parse_device_info(text: str) -> DeviceInfo:
    """Strictly decode a device-info annotation value; raises ContractError with a stable reason."""
    obj = load_object(text, _WHAT)
    check_version(obj, _WHAT, "version", DEVICE_INFO_VERSION)
    check_fields(obj, _WHAT, FIELDS)
    values = [get_str(obj, key, _WHAT) for key in FIELDS[1:]]
    return DeviceInfo(DEVICE_INFO_VERSION, *values)
