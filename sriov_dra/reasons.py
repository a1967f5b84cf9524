"""The driver's reasons: every stable reason code the node agent and its CLI raise, defined once.

Reasons the contract also raises (InvalidPCIAddress, InvalidInterfaceName) live in
sriov_contract.reasons. A reason reaches kubelet (the start of a prepare error), Events, the
`reason` label of sriov_dra_failures_total and tests, so values never change. MEANINGS gives each
reason's meaning and the operator's action; docs/reasons.md is generated from it
(scripts/gen_reasons.py).
"""

from __future__ import annotations

from typing import Final

# The pure core: templates, VfConfig, rendering, interface plans, selections (sriov_dra.core).
MISSING_NETWORK_TEMPLATE: Final = "MissingNetworkTemplate"
INVALID_TEMPLATE_REFERENCE: Final = "InvalidTemplateReference"
CONFLICTING_TEMPLATE_REFERENCE: Final = "ConflictingTemplateReference"
INVALID_VF_CONFIG: Final = "InvalidVfConfig"
UNSUPPORTED_CNI_CONFIG: Final = "UnsupportedCNIConfig"
PCI_ADDRESS_MISMATCH: Final = "PCIAddressMismatch"
DUPLICATE_INTERFACE_NAME: Final = "DuplicateInterfaceName"
CONFLICTING_DEVICE_REQUIREMENTS: Final = "ConflictingDeviceRequirements"
DUPLICATE_PCI_ADDRESS: Final = "DuplicatePCIAddress"
UNREFERENCED_CLAIM: Final = "ClaimNotReferencedByPod"
ANNOTATION_TOO_LARGE: Final = "AnnotationTooLarge"
MANUAL_SELECTION_CONFLICT: Final = "ManualSelectionConflictsWithManagedTemplate"
MANAGED_SELECTION_CONFLICT: Final = "ManagedSelectionConflict"
DEVICE_STATUS_TOO_LARGE: Final = "DeviceStatusTooLarge"
# SriovResourcePolicy and DeviceAttributes evaluation.
UNRESOLVED_DEVICE_ATTRIBUTES: Final = "UnresolvedDeviceAttributes"
INVALID_DEVICE_ATTRIBUTE: Final = "InvalidDeviceAttribute"
UNSUPPORTED_POLICY_FILTER: Final = "UnsupportedPolicyFilter"
# Device health (the ResourceSlice taint's value and the Node Events; KEP-4680/5055).
PF_LINK_DOWN: Final = "PFLinkDown"
VF_MISSING: Final = "VFMissing"
DEVICE_RECOVERED: Final = "DeviceRecovered"
# Checkpoint and managed-binding records.
CORRUPT_CHECKPOINT: Final = "CorruptCheckpoint"
CHECKPOINT_RECOVERED: Final = "CheckpointRecovered"
UNKNOWN_CHECKPOINT_VERSION: Final = "UnknownCheckpointVersion"
UNKNOWN_MANAGED_BINDING_VERSION: Final = "UnknownManagedBindingVersion"
CORRUPT_MANAGED_BINDING: Final = "CorruptManagedBinding"
MANAGED_BINDING_MISSING: Final = "ManagedBindingMissing"
CHECKPOINT_WRITE_FAILED: Final = "CheckpointWriteFailed"
CLAIM_NOT_PREPARED: Final = "ClaimNotPrepared"
DEVICE_NOT_IN_CLAIM: Final = "DeviceNotInClaim"
# Prepare: the claim and its allocation.
CLAIM_NOT_FOUND: Final = "ClaimNotFound"
CLAIM_READ_FAILED: Final = "ClaimReadFailed"
CLAIM_REPLACED: Final = "ClaimReplaced"
CLAIM_RELEASE_IN_PROGRESS: Final = "ClaimReleaseInProgress"
CLAIM_NOT_ALLOCATED: Final = "ClaimNotAllocated"
UNSUPPORTED_CONSUMER: Final = "UnsupportedConsumer"
UNSUPPORTED_SHARED_ALLOCATION: Final = "UnsupportedSharedAllocation"
UNKNOWN_DEVICE: Final = "UnknownDevice"
VFIO_GROUP_MISSING: Final = "VfioGroupMissing"
# Managed bindings (MULTUS_AUTO_ATTACH): the claim's one Pod consumer.
INVALID_CLAIM: Final = "InvalidClaim"
UNSUPPORTED_MANAGED_CLAIM_KIND: Final = "UnsupportedManagedClaimKind"
UNSUPPORTED_RESERVATION: Final = "UnsupportedReservation"
CLAIM_NOT_RESERVED: Final = "ClaimNotReserved"
MULTIPLE_CONSUMERS_UNSUPPORTED: Final = "MultipleConsumersUnsupported"
ADMIN_ACCESS_UNSUPPORTED: Final = "AdminAccessUnsupported"
SHARED_ALLOCATION_UNSUPPORTED: Final = "SharedAllocationUnsupported"
POD_NOT_FOUND: Final = "PodNotFound"
POD_REPLACED: Final = "PodReplaced"
POD_ON_OTHER_NODE: Final = "PodOnOtherNode"
POD_TERMINATING: Final = "PodTerminating"
HOST_NETWORK_UNSUPPORTED: Final = "HostNetworkUnsupported"
NODE_REPLACED: Final = "NodeReplaced"
CLAIM_NOT_OWNED_BY_POD: Final = "ClaimNotOwnedByPod"
INVALID_POD_CLAIM: Final = "InvalidPodClaim"
POD_CLAIM_STATUS_MISSING: Final = "PodClaimStatusMissing"
UNSUPPORTED_MANAGED_DRIVER: Final = "UnsupportedManagedDriver"
DEVICE_NOT_ELIGIBLE: Final = "DeviceNotEligible"
SOURCE_NETWORK_NOT_FOUND: Final = "SourceNetworkNotFound"
ALLOCATION_CHANGED: Final = "AllocationChanged"
RESERVATION_LOST: Final = "ReservationLost"
POD_PATCH_RETRIES_EXHAUSTED: Final = "PodPatchRetriesExhausted"
# Shadows, their release and repair.
SHADOW_CONFLICT: Final = "ShadowConflict"
SHADOW_DELETION_PENDING: Final = "ShadowDeletionPending"
SHADOW_RESTORED: Final = "ShadowRestored"
FINALIZER_REMOVAL_RETRIES_EXHAUSTED: Final = "FinalizerRemovalRetriesExhausted"
REPAIR_CRASHED: Final = "RepairCrashed"
# The claim's status.devices report; SHADOW_READY is the reason of its Ready condition.
SHADOW_READY: Final = "ShadowReady"
DEVICE_STATUS_FORBIDDEN: Final = "DeviceStatusForbidden"
DEVICE_STATUS_FAILED: Final = "DeviceStatusFailed"
# The Kubernetes API (sriov_dra.apierrors), by HTTP status.
ACCESS_DENIED: Final = "AccessDenied"
NOT_FOUND: Final = "NotFound"
CONFLICT: Final = "Conflict"
INVALID: Final = "Invalid"
API_REQUEST_FAILED: Final = "ApiRequestFailed"
# sysfs.
SYSFS_UNREADABLE: Final = "SysfsUnreadable"
UNREADABLE_VIRTUAL_FUNCTION: Final = "UnreadableVirtualFunction"
VF_NOT_KERNEL_BOUND: Final = "VfNotKernelBound"
VF_NETDEVICE_MISSING: Final = "VfNetdeviceMissing"
VF_DRIVER_BIND_FAILED: Final = "VfDriverBindFailed"
# The agent's configuration.
MISSING_NODE_NAME: Final = "MissingNodeName"
INVALID_CONFIGURATION_MODE: Final = "InvalidConfigurationMode"
INVALID_HEALTHCHECK_PORT: Final = "InvalidHealthcheckPort"
INVALID_REPAIR_INTERVAL: Final = "InvalidRepairInterval"
INVALID_METRICS_PORT: Final = "InvalidMetricsPort"
AUTO_ATTACH_REQUIRES_MULTUS: Final = "AutoAttachRequiresMultus"
# The sriov-dra CLI (inspect, orphans, render, uninstall-check).
NO_CLUSTER_ACCESS: Final = "NoClusterAccess"
NODE_UNREADABLE: Final = "NodeUnreadable"
CHECKPOINT_UNREADABLE: Final = "CheckpointUnreadable"
INVALID_TARGET: Final = "InvalidTarget"
INVALID_MANIFEST: Final = "InvalidManifest"
NOT_AN_ORPHAN: Final = "NotAnOrphan"
OTHER_NODE: Final = "OtherNode"
SHADOW_REPLACED: Final = "ShadowReplaced"
FINALIZE_FAILED: Final = "FinalizeFailed"
UNINSTALL_BLOCKED: Final = "UninstallBlocked"

_RETRY = "Nothing: kubelet retries."
_RECREATE_POD = "Recreate the Pod (or its claim) within the supported envelope."
_DRAIN = "Drain the node and inspect the checkpoint (sriov-dra inspect); never delete it blindly."

# reason -> (what it means, what the operator does)
MEANINGS: Final[dict[str, tuple[str, str]]] = {
    MISSING_NETWORK_TEMPLATE: (
        "The claim's VfConfig names no network template and the policy supplies none.",
        "Set netAttachDefName in the VfConfig or the SriovResourcePolicy.",
    ),
    INVALID_TEMPLATE_REFERENCE: (
        "A network template reference is not NAMESPACE/NAME or NAME.",
        "Fix netAttachDefName.",
    ),
    CONFLICTING_TEMPLATE_REFERENCE: (
        "The claim and the class or policy name different network templates for one device.",
        "Name one template per device.",
    ),
    INVALID_VF_CONFIG: ("An opaque VfConfig parameter is malformed.", "Fix the named field of the VfConfig."),
    UNSUPPORTED_CNI_CONFIG: (
        "The template NAD's CNI config is not one the driver can render for a VF.",
        "Use an sriov conflist (optionally followed by tuning or rdma) as the template.",
    ),
    PCI_ADDRESS_MISMATCH: (
        "The template pins a PCI address other than the allocated VF's.",
        "Remove deviceID/pciBusID from the template.",
    ),
    DUPLICATE_INTERFACE_NAME: (
        "Two devices of the Pod would get the same interface name.",
        "Give each device its own interface name.",
    ),
    CONFLICTING_DEVICE_REQUIREMENTS: (
        "One device is allocated to requests with different template, interface or driver config.",
        "Give both requests the same configuration.",
    ),
    DUPLICATE_PCI_ADDRESS: (
        "One VF appears twice in the Pod's allocations.",
        "Delete the claims and let the scheduler allocate again.",
    ),
    UNREFERENCED_CLAIM: (
        "The claim's reserved Pod does not reference it in spec.resourceClaims.",
        _RECREATE_POD,
    ),
    ANNOTATION_TOO_LARGE: (
        "The Pod's annotations would exceed the Kubernetes size limit.",
        "Request fewer VFs per Pod or shrink other annotations.",
    ),
    MANUAL_SELECTION_CONFLICT: (
        "The Pod selects by hand a network the driver manages for it.",
        "Remove the manual selection from the networks annotation.",
    ),
    MANAGED_SELECTION_CONFLICT: (
        "The Pod's managed selections or registry were edited, copied or collide with another selection.",
        "Managed entries are written only by the driver: restore them or recreate the Pod.",
    ),
    DEVICE_STATUS_TOO_LARGE: (
        "A device's status.devices data would exceed the API's size limit; it is not reported.",
        "Nothing: diagnostics only; networking is unaffected.",
    ),
    UNRESOLVED_DEVICE_ATTRIBUTES: (
        "A policy's deviceAttributesSelector matches no DeviceAttributes object.",
        "Create the DeviceAttributes object or fix the selector.",
    ),
    INVALID_DEVICE_ATTRIBUTE: (
        "A DeviceAttributes attribute does not have exactly one value type.",
        "Fix the attribute.",
    ),
    UNSUPPORTED_POLICY_FILTER: (
        "A SriovResourcePolicy uses a filter automatic mode does not support.",
        "Use vendors, devices, pfNames, pfPciAddresses, pciAddresses or linkType.",
    ),
    PF_LINK_DOWN: (
        "A VF's physical function has no link (operstate down or no carrier): the VF is reported "
        "Unhealthy to the kubelet and tainted NoSchedule in the ResourceSlice, so no new claim gets it.",
        "Check the PF's cable, switch port and `ip link show <PF>`; the taint and the Pod status clear "
        "by themselves when the link returns.",
    ),
    VF_MISSING: (
        "A VF the driver discovered at start-up is gone from sysfs (its PF's sriov_numvfs changed, or "
        "the device was removed): reported Unhealthy and tainted NoSchedule.",
        "Restore the VF count (sriov_numvfs) or the device; restart the driver if the VF set changed for good.",
    ),
    DEVICE_RECOVERED: (
        "A VF that was Unhealthy is healthy again (Normal Event on the Node); its taint was removed.",
        "Nothing; Pods that lost traffic meanwhile may need a restart.",
    ),
    CORRUPT_CHECKPOINT: ("The checkpoint file is damaged; it was left untouched.", _DRAIN),
    CHECKPOINT_RECOVERED: (
        "The driver found its checkpoint damaged, moved it aside and started from the previous "
        "generation (or empty), rebuilding bindings from this node's shadows and claims.",
        "Read the Warning or sriov-dra inspect node; if it lists shadows not rebuilt, release those "
        "with sriov-dra orphans once no Pod uses them. Keep or delete the moved files.",
    ),
    UNKNOWN_CHECKPOINT_VERSION: (
        "The checkpoint has a format version this build does not understand.",
        "Run a driver build that understands it; nothing was deleted.",
    ),
    UNKNOWN_MANAGED_BINDING_VERSION: (
        "A checkpointed managed binding has a version this build does not understand.",
        "Run the driver build that wrote it, or drain the node and clean up.",
    ),
    CORRUPT_MANAGED_BINDING: ("A checkpointed managed binding is malformed.", _DRAIN),
    MANAGED_BINDING_MISSING: (
        "A claim was prepared before auto-attach was enabled and has no managed binding.",
        "Drain the node and recreate the Pod.",
    ),
    CHECKPOINT_WRITE_FAILED: (
        "The checkpoint could not be persisted; the change was not applied.",
        "Check the plugin directory's disk space and permissions.",
    ),
    CLAIM_NOT_PREPARED: (
        "An update names a claim that has no checkpoint record.",
        "Report it: a driver bug.",
    ),
    DEVICE_NOT_IN_CLAIM: ("An update names devices the claim does not hold.", "Report it: a driver bug."),
    CLAIM_NOT_FOUND: ("The ResourceClaim kubelet names does not exist (yet, or any more).", _RETRY),
    CLAIM_READ_FAILED: (
        "Reading a ResourceClaim failed (the message gives the HTTP status).",
        "Check the API server and the driver's RBAC; kubelet retries.",
    ),
    CLAIM_REPLACED: ("The claim was recreated: its UID is not the one kubelet asked for.", _RETRY),
    CLAIM_RELEASE_IN_PROGRESS: (
        "The claim UID is still prepared for an earlier Pod and is being released.",
        "Nothing: prepare succeeds once kubelet has unprepared it for the old Pod.",
    ),
    CLAIM_NOT_ALLOCATED: (
        "The claim has no allocation yet.",
        "Nothing: the scheduler allocates it; kubelet retries.",
    ),
    UNSUPPORTED_CONSUMER: (
        "A VF claim is reserved for other than exactly one Pod.",
        "Use one claim per Pod.",
    ),
    UNSUPPORTED_SHARED_ALLOCATION: (
        "A VF is allocated with adminAccess or a share ID; VFs are exclusive.",
        "Remove adminAccess or sharing from the request.",
    ),
    UNKNOWN_DEVICE: (
        "The claim allocates a device this node does not have.",
        "Delete the claim so the scheduler allocates again.",
    ),
    VFIO_GROUP_MISSING: (
        "A VF bound to vfio-pci has no IOMMU group.",
        "Enable the IOMMU (intel_iommu=on / amd_iommu).",
    ),
    INVALID_CLAIM: (
        "The claim lacks namespace, name or UID.",
        "Report it: kubelet sent an incomplete claim.",
    ),
    UNSUPPORTED_MANAGED_CLAIM_KIND: (
        "An extended-resource claim is reached in a way the scheduler never makes: named in "
        "pod.spec.resourceClaims, named there and in status.extendedResourceClaimStatus, or named in "
        "the status without the scheduler's annotation.",
        "Ask for the extended resource in resources.limits only, or use an ordinary ResourceClaim "
        "or ResourceClaimTemplate.",
    ),
    UNSUPPORTED_RESERVATION: ("The claim is reserved for a non-Pod consumer.", _RECREATE_POD),
    CLAIM_NOT_RESERVED: ("The claim is reserved for no consumer.", _RETRY),
    MULTIPLE_CONSUMERS_UNSUPPORTED: (
        "The claim is reserved for several consumers; a managed claim serves one Pod.",
        "Use one ResourceClaimTemplate-generated claim per Pod.",
    ),
    ADMIN_ACCESS_UNSUPPORTED: ("A managed VF is allocated with adminAccess.", "Remove adminAccess."),
    SHARED_ALLOCATION_UNSUPPORTED: (
        "A managed VF is allocated with a share ID or consumed capacity.",
        "Do not share managed VFs.",
    ),
    POD_NOT_FOUND: ("The claim's reserved Pod (or the Pod named) does not exist.", _RETRY),
    POD_REPLACED: ("The reserved Pod was replaced (another UID) or moved.", _RETRY),
    POD_ON_OTHER_NODE: ("The reserved Pod is bound to another node.", _RETRY),
    POD_TERMINATING: ("The reserved Pod is terminating; no new network is attached.", "Nothing."),
    HOST_NETWORK_UNSUPPORTED: (
        "The Pod uses hostNetwork, which has no Pod network namespace for a managed VF.",
        _RECREATE_POD,
    ),
    NODE_REPLACED: (
        "The Node object was recreated since the driver started.",
        "Restart the driver on this node.",
    ),
    CLAIM_NOT_OWNED_BY_POD: ("A template claim the Pod names is not owned by the Pod.", _RECREATE_POD),
    INVALID_POD_CLAIM: (
        "A pod.spec.resourceClaims entry names neither a claim nor a template.",
        "Fix the Pod spec.",
    ),
    POD_CLAIM_STATUS_MISSING: (
        "A template claim has no status.resourceClaimStatuses entry yet.",
        _RETRY,
    ),
    UNSUPPORTED_MANAGED_DRIVER: (
        "A managed network's device is configured for a userspace driver.",
        "Remove driver from the VfConfig: managed networks need a kernel netdevice VF.",
    ),
    DEVICE_NOT_ELIGIBLE: (
        "The allocated device is not advertised by any policy right now (a stale allocation).",
        "Delete the claim so the scheduler allocates again.",
    ),
    SOURCE_NETWORK_NOT_FOUND: (
        "The template NetworkAttachmentDefinition does not exist.",
        "Create it or fix the template reference.",
    ),
    ALLOCATION_CHANGED: (
        "The claim now allocates other devices than the prepared ones; repair stops.",
        "Nothing: the VFs stay until kubelet unprepares the claim.",
    ),
    RESERVATION_LOST: (
        "The claim is no longer reserved for the Pod.",
        "Nothing: its networks are not published.",
    ),
    POD_PATCH_RETRIES_EXHAUSTED: ("The Pod kept changing while its networks were patched.", _RETRY),
    SHADOW_CONFLICT: (
        "An object with the shadow's name exists but is not this binding's shadow.",
        "Delete or rename the foreign NetworkAttachmentDefinition.",
    ),
    SHADOW_DELETION_PENDING: (
        "The shadow is being deleted while its Pod still uses it; it is not recreated.",
        "Delete and recreate the Pod.",
    ),
    SHADOW_RESTORED: (
        "Someone edited a shadow's config, managed labels or binding annotation; repair put the driver's bytes back.",
        "Find the writer in the audit log; install deploy/base/admission/ (auto-sriov-managed-shadows) to refuse such edits.",
    ),
    FINALIZER_REMOVAL_RETRIES_EXHAUSTED: (
        "The shadow kept changing while its finalizer was removed.",
        _RETRY,
    ),
    REPAIR_CRASHED: ("Repair of a claim failed unexpectedly (a bug).", "Report it with the driver log."),
    SHADOW_READY: (
        "Reason of the Ready condition in the claim's status.devices.",
        "Nothing: the binding is Ready.",
    ),
    DEVICE_STATUS_FORBIDDEN: (
        "The API server refused the driver's status.devices entries.",
        "Grant associated-node:patch on resourceclaims/driver (deploy/base/driver-rbac.yaml); networking is unaffected.",
    ),
    DEVICE_STATUS_FAILED: (
        "Writing status.devices failed unexpectedly (a bug).",
        "Report it with the driver log; networking is unaffected.",
    ),
    ACCESS_DENIED: (
        "The API server answered 403.",
        "Grant the rights in deploy/base/driver-rbac.yaml; state is kept.",
    ),
    NOT_FOUND: ("The API server answered 404 for an object that must exist.", _RETRY),
    CONFLICT: ("The API server answered 409 (a resourceVersion or precondition conflict).", _RETRY),
    INVALID: ("The API server answered 422 (a failed patch test or a rejected field).", _RETRY),
    API_REQUEST_FAILED: (
        "Another HTTP status, or no response (status 0: the request may have been applied).",
        "Check the API server and the node's network; kubelet retries.",
    ),
    SYSFS_UNREADABLE: ("The PCI devices under sysfs cannot be listed.", "Mount sysfs into the driver Pod."),
    UNREADABLE_VIRTUAL_FUNCTION: (
        "A PF's virtfn link cannot be read.",
        "Check the PF's SR-IOV configuration.",
    ),
    VF_NOT_KERNEL_BOUND: (
        "A VF that needs a netdevice is bound to no or a userspace driver.",
        "Request driver 'default' in the VfConfig or rebind the VF.",
    ),
    VF_NETDEVICE_MISSING: (
        "A kernel-bound VF has no network interface.",
        "Check the PF's SR-IOV setup (sriov_numvfs) and the kernel log.",
    ),
    VF_DRIVER_BIND_FAILED: (
        "Binding a VF to the requested driver failed.",
        "Check the driver module is loaded and accepts the device, and the VF is not in use.",
    ),
    MISSING_NODE_NAME: ("The agent does not know its node.", "Set --node-name or NODE_NAME."),
    INVALID_CONFIGURATION_MODE: (
        "CONFIGURATION_MODE is not STANDALONE or MULTUS.",
        "Fix CONFIGURATION_MODE.",
    ),
    INVALID_HEALTHCHECK_PORT: ("HEALTHCHECK_PORT is out of range.", "Use -1 (off), 0 (any) or a TCP port."),
    INVALID_REPAIR_INTERVAL: ("REPAIR_INTERVAL is out of range.", "Use 1 to 3600 seconds."),
    INVALID_METRICS_PORT: ("METRICS_PORT is out of range.", "Use -1 (off), 0 (any) or a TCP port."),
    AUTO_ATTACH_REQUIRES_MULTUS: (
        "MULTUS_AUTO_ATTACH is set outside CONFIGURATION_MODE=MULTUS.",
        "Set the mode to MULTUS or turn auto-attach off.",
    ),
    NO_CLUSTER_ACCESS: ("The CLI cannot load cluster credentials.", "Pass --kubeconfig or set KUBECONFIG."),
    NODE_UNREADABLE: ("The Node object cannot be read or has no UID.", "Check the node name and RBAC."),
    CHECKPOINT_UNREADABLE: (
        "The CLI cannot read the checkpoint file.",
        "Run on the node as root or pass --checkpoint.",
    ),
    INVALID_TARGET: ("The CLI target is not NAMESPACE/NAME.", "Pass NAMESPACE/NAME."),
    INVALID_MANIFEST: (
        "The file does not hold one NetworkAttachmentDefinition object.",
        "Pass a file with exactly one NAD.",
    ),
    NOT_AN_ORPHAN: (
        "The attachment named is not an orphan of this node.",
        "Name an orphan by its full attachment ID (sriov-dra orphans); active bindings are kubelet's.",
    ),
    OTHER_NODE: (
        "The shadow's binding names another node (an orphan scan classification).",
        "Run the scan on that node.",
    ),
    SHADOW_REPLACED: ("The orphan's shadow was replaced since the scan.", "Scan again."),
    FINALIZE_FAILED: ("The orphan's shadow changed while it was finalized.", "Scan again."),
    UNINSTALL_BLOCKED: (
        "Managed shadows, our finalizers, allocated claims or checkpoint records remain (sriov-dra uninstall-check).",
        "Delete the workloads using the driver's claims, let the driver release them, check again, then uninstall.",
    ),
}
