"""Names the operator reads and writes: API groups, labels, annotations, attribute keys.

Upstream sriov-network-operator's spellings where they exist (the group, the generated-by and
resource-pool labels, the owner-ref marker), spec 12.2's for the new ones. The driver's
discovery-owned attribute keys are repeated here rather than imported from the driver, which the
operator must not depend on; a unit test keeps the two lists equal.
"""

from __future__ import annotations

from typing import Final

from sriov_contract.keys import DOMAIN as DRIVER_DOMAIN

GROUP: Final = "sriovnetwork.openshift.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
POLICIES: Final = "sriovnetworknodepolicies"
NETWORKS: Final = "sriovnetworks"
NODE_STATES: Final = "sriovnetworknodestates"
OPERATOR_CONFIGS: Final = "sriovoperatorconfigs"
OPERATOR_CONFIG_NAME: Final = "default"
DEFAULT_POLICY_NAME: Final = "default"
DRA_FEATURE_GATE: Final = "dynamicResourceAllocation"

DRIVER_GROUP: Final = DRIVER_DOMAIN
DRIVER_VERSION: Final = "v1alpha1"
DEVICE_ATTRIBUTES: Final = "deviceattributes"
RESOURCE_POLICIES: Final = "sriovresourcepolicies"
DEVICE_CLASS_GROUP: Final = "resource.k8s.io"
DEVICE_CLASS_VERSION: Final = "v1"
DEVICE_CLASSES: Final = "deviceclasses"
NAD_GROUP: Final = "k8s.cni.cncf.io"
NADS: Final = "network-attachment-definitions"

FIELD_MANAGER: Final = "sriov-network-operator"
GENERATED_BY_LABEL: Final = f"{GROUP}/generated-by"
GENERATED_BY_VALUE: Final = "sriov-network-operator"
RESOURCE_POOL_LABEL: Final = f"{GROUP}/resource-pool"
NODE_LABEL: Final = f"{GROUP}/node"
NODE_POLICY_UID_LABEL: Final = f"{GROUP}/node-policy-uid"
RESOURCE_NAME_LABEL: Final = f"{GROUP}/resource-name"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"

OWNER_REF_ANNOTATION: Final = f"{GROUP}/owner-ref"
NAD_RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"

# Condition types.
READY: Final = "Ready"
DRA_READY: Final = "DRAConfigurationReady"

# spec.dra.attributes input keys consumed by the operator, never published (spec 12.2.1).
REF_NAME_KEY: Final = f"{GROUP}/sriovNetworkName"
REF_NAMESPACE_KEY: Final = f"{GROUP}/sriovNetworkNamespace"
REFERENCE_KEYS: Final = frozenset({REF_NAME_KEY, REF_NAMESPACE_KEY})

# Generated output: the compatibility resourceName and the driver-facing NAD pair.
RESOURCE_NAME_ATTRIBUTE: Final = "k8s.cni.cncf.io/resourceName"
NAD_NAME_ATTRIBUTE: Final = f"{DRIVER_DOMAIN}/netAttachDefName"
NAD_NAMESPACE_ATTRIBUTE: Final = f"{DRIVER_DOMAIN}/netAttachDefNamespace"
GENERATED_ATTRIBUTES: Final = frozenset(
    {RESOURCE_NAME_ATTRIBUTE, NAD_NAME_ATTRIBUTE, NAD_NAMESPACE_ATTRIBUTE}
)

# What the driver's discovery publishes for every VF; a policy may never set these.
DISCOVERY_ATTRIBUTES: Final = frozenset(
    {
        f"{DRIVER_DOMAIN}/vendor",
        f"{DRIVER_DOMAIN}/deviceID",
        f"{DRIVER_DOMAIN}/pfDeviceID",
        f"{DRIVER_DOMAIN}/pciAddress",
        "k8s.cni.cncf.io/deviceID",
        f"{DRIVER_DOMAIN}/PFName",
        f"{DRIVER_DOMAIN}/EswitchMode",
        f"{DRIVER_DOMAIN}/vfID",
        "resource.kubernetes.io/pcieRoot",
        f"{DRIVER_DOMAIN}/pfPciAddress",
        "resource.kubernetes.io/pciBusID",
        f"{DRIVER_DOMAIN}/linkType",
        f"{DRIVER_DOMAIN}/rdmaCapable",
        "dra.net/numaNode",
    }
)

# The pinned DRA limits (spec 12.2.2): attributes plus capacities per device, and the length of a
# string or version value.
MAX_DEVICE_ATTRIBUTES: Final = 32
MAX_VALUE_LENGTH: Final = 64


def policy_attributes_name(policy_uid: str) -> str:
    """The per-policy DeviceAttributes name (spec 12.2.4): recreation gets a new object."""
    return f"dra-policy-{policy_uid}-attrs"


def pool_of(resource_name: str) -> str:
    """Upstream's resourceName-to-pool normalisation: `_` to `-`, lower case, only [a-z0-9-],
    trimmed of `-`; an empty result is `sriov` (so `sriov_vfs` is pool `sriov-vfs`)."""
    lowered = resource_name.replace("_", "-").lower()
    kept = "".join(c for c in lowered if c.isascii() and (c.isalnum() or c == "-")).strip("-")
    return kept or "sriov"


def pool_attributes_name(resource_name: str) -> str:
    """The legacy per-pool DeviceAttributes name of policies without a dra block."""
    return f"{pool_of(resource_name)}-attrs"
