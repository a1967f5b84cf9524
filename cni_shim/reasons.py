"""The CNI shim's reasons: every stable reason code the CNI side raises, each defined once here.

Reasons the contract also raises (InvalidInterfaceName, InvalidNetworksAnnotation) live in
sriov_contract.reasons. MEANINGS gives each reason's meaning and the operator's action;
docs/reasons.md is generated from it (scripts/gen_reasons.py). The CNI error JSON carries the
reason at the start of its details (its msg is Multus's wording), so values never change. Plain constants: the executable's
start-up path imports this module, which must cost next to nothing.
"""

# Spelled out instead of imported: `typing` alone costs milliseconds on every start.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Final

# The CNI request: environment, stdin, network config, versions.
INVALID_ENVIRONMENT: "Final" = "InvalidEnvironment"
STDIN_UNREADABLE: "Final" = "StdinUnreadable"
INVALID_CNI_ARGS: "Final" = "InvalidCniArgs"
MALFORMED_NETWORK_CONFIG: "Final" = "MalformedNetworkConfig"
INVALID_NETWORK_CONFIG: "Final" = "InvalidNetworkConfig"
MISSING_NETWORK_NAME: "Final" = "MissingNetworkName"
INVALID_NETWORK_NAME: "Final" = "InvalidNetworkName"
INVALID_CNI_VERSION: "Final" = "InvalidCniVersion"
INCOMPATIBLE_CNI_VERSION: "Final" = "IncompatibleCniVersion"
INVALID_KUBECONFIG: "Final" = "InvalidKubeconfig"
# Pods, networks and delegates.
POD_UID_MISMATCH: "Final" = "PodUIDMismatch"
DEFAULT_NETWORK_NOT_READY: "Final" = "DefaultNetworkNotReady"
NO_NETWORK_FOUND: "Final" = "NoNetworkFound"
INVALID_NETWORK_FILE: "Final" = "InvalidNetworkFile"
NAMESPACE_ISOLATION_VIOLATION: "Final" = "NamespaceIsolationViolation"
INTERFACE_NAME_COLLISION: "Final" = "InterfaceNameCollision"
DELEGATE_NOT_FOUND: "Final" = "DelegateNotFound"
DELEGATE_FAILED: "Final" = "DelegateFailed"
DELEGATE_VERSION_UNKNOWN: "Final" = "DelegateVersionUnknown"
INCOMPATIBLE_DELEGATE_VERSION: "Final" = "IncompatibleDelegateVersion"
INVALID_DELEGATE_RESULT: "Final" = "InvalidDelegateResult"
INVALID_RESULT: "Final" = "InvalidResult"
RESULT_NOT_CONVERTIBLE: "Final" = "ResultNotConvertible"
DEFAULT_ROUTE_FAILED: "Final" = "DefaultRouteFailed"
NETNS_NOT_FOUND: "Final" = "NetnsNotFound"
# The delegate cache (DEL and CHECK replay what ADD ran).
UNKNOWN_CONTAINER: "Final" = "UnknownContainer"
DELEGATE_CACHE_UNREADABLE: "Final" = "DelegateCacheUnreadable"
DELEGATE_CACHE_CORRUPT: "Final" = "DelegateCacheCorrupt"
DELEGATE_CACHE_WRITE_FAILED: "Final" = "DelegateCacheWriteFailed"
INVALID_CACHE_KEY: "Final" = "InvalidCacheKey"
SHADOW_TEARDOWN_INCOMPLETE: "Final" = "ShadowTeardownIncomplete"
# The Kubernetes API.
KUBE_API_UNAVAILABLE: "Final" = "KubeApiUnavailable"
KUBE_API_REFUSED: "Final" = "KubeApiRefused"
# The managed-shadow guard (spec 10.3): one reason per failed check.
MANAGED_SHADOW_DUPLICATE_SELECTION: "Final" = "ManagedShadowDuplicateSelection"
MANAGED_SHADOW_REGISTRY_INVALID: "Final" = "ManagedShadowRegistryInvalid"
MANAGED_SHADOW_REGISTRY_POD_MISMATCH: "Final" = "ManagedShadowRegistryPodMismatch"
MANAGED_SHADOW_SELECTION_COUNT: "Final" = "ManagedShadowSelectionCount"
MANAGED_SHADOW_SELECTION_OVERRIDE: "Final" = "ManagedShadowSelectionOverride"
MANAGED_SHADOW_CONFIG_NOT_STATIC_SRIOV: "Final" = "ManagedShadowConfigNotStaticSriov"
MANAGED_SHADOW_PCI_MISMATCH: "Final" = "ManagedShadowPciMismatch"
MANAGED_SHADOW_BINDING_INVALID: "Final" = "ManagedShadowBindingInvalid"
MANAGED_SHADOW_POD_MISMATCH: "Final" = "ManagedShadowPodMismatch"
MANAGED_SHADOW_NODE_MISMATCH: "Final" = "ManagedShadowNodeMismatch"
MANAGED_SHADOW_NAMESPACE_MISMATCH: "Final" = "ManagedShadowNamespaceMismatch"
MANAGED_SHADOW_OWNER_MISMATCH: "Final" = "ManagedShadowOwnerMismatch"
MANAGED_SHADOW_UNPROTECTED: "Final" = "ManagedShadowUnprotected"
MANAGED_SHADOW_TERMINATING: "Final" = "ManagedShadowTerminating"
MANAGED_SHADOW_HAS_RESOURCE_NAME: "Final" = "ManagedShadowHasResourceName"
MANAGED_SHADOW_CONFIG_HASH_MISMATCH: "Final" = "ManagedShadowConfigHashMismatch"
MANAGED_SHADOW_NOT_REGISTERED: "Final" = "ManagedShadowNotRegistered"
MANAGED_SHADOW_REGISTRY_MISMATCH: "Final" = "ManagedShadowRegistryMismatch"
# Device access: no VF reaches a Pod that was not given it.
VIRTUAL_FUNCTION_NOT_ALLOCATED: "Final" = "VirtualFunctionNotAllocated"
# The resourceName path: the kubelet's device-plugin allocations.
POD_RESOURCES_UNAVAILABLE: "Final" = "PodResourcesUnavailable"
DEVICE_CHECKPOINT_UNREADABLE: "Final" = "DeviceCheckpointUnreadable"
# Thick mode: the shim, the daemon and the daemon's own config.
DAEMON_UNAVAILABLE: "Final" = "DaemonUnavailable"
DAEMON_TIMEOUT: "Final" = "DaemonTimeout"
DAEMON_PROTOCOL_ERROR: "Final" = "DaemonProtocolError"
DAEMON_REPORTED_ERROR: "Final" = "DaemonReportedError"
MALFORMED_DAEMON_REQUEST: "Final" = "MalformedDaemonRequest"
DAEMON_CONFIG_UNREADABLE: "Final" = "DaemonConfigUnreadable"
DAEMON_CONFIG_MALFORMED: "Final" = "DaemonConfigMalformed"
AUTOCONF_FAILED: "Final" = "AutoconfFailed"
# A bug.
INTERNAL_ERROR: "Final" = "InternalError"

_GUARD = "The managed-shadow guard refused the shadow before any delegate ran: "
_RECREATE = "The shadow or Pod was edited or is stale: recreate the Pod; never edit a shadow by hand."

# reason -> (what it means, what the operator does)
MEANINGS: "Final[dict[str, tuple[str, str]]]" = {
    INVALID_ENVIRONMENT: (
        "A required CNI_* environment variable is missing or invalid.",
        "Check the container runtime's CNI invocation.",
    ),
    STDIN_UNREADABLE: ("The network config could not be read from stdin.", "Check the runtime's CNI call."),
    INVALID_CNI_ARGS: (
        "CNI_ARGS is not a list of KEY=VALUE pairs the shim understands.",
        "Check the runtime's CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME, ...).",
    ),
    MALFORMED_NETWORK_CONFIG: (
        "The network config on stdin is not a JSON object.",
        "Fix the shim's conflist in the CNI config directory.",
    ),
    INVALID_NETWORK_CONFIG: (
        "A field of the shim's network config has the wrong type or value.",
        "Fix the named field in the shim's conflist.",
    ),
    MISSING_NETWORK_NAME: ("The network config has no name.", "Give the conflist a name."),
    INVALID_NETWORK_NAME: (
        "A network name holds characters CNI does not allow.",
        "Rename the network (letters, digits, '_', '.', '-').",
    ),
    INVALID_CNI_VERSION: ("cniVersion is not a string.", "Fix cniVersion in the network config."),
    INCOMPATIBLE_CNI_VERSION: (
        "The config's cniVersion does not allow the requested command.",
        "Raise cniVersion in the network config.",
    ),
    INVALID_KUBECONFIG: (
        "The kubeconfig named by the config's kubeconfig key is unusable.",
        "Fix the file (server, certificate authority, token).",
    ),
    POD_UID_MISMATCH: (
        "The Pod in the API has another UID than the one the runtime names: it was replaced.",
        "Nothing: the runtime retries with the new sandbox.",
    ),
    DEFAULT_NETWORK_NOT_READY: (
        "The readiness indicator file of the default network does not exist yet.",
        "Check that the default network's plugin is running; the runtime retries.",
    ),
    NO_NETWORK_FOUND: (
        "No delegate network of the requested name exists (NAD, conf file or cluster network).",
        "Create the NetworkAttachmentDefinition or CNI config file, or fix the name.",
    ),
    INVALID_NETWORK_FILE: (
        "A CNI config file in the delegate directory cannot be loaded.",
        "Fix or remove the named file.",
    ),
    NAMESPACE_ISOLATION_VIOLATION: (
        "The Pod selects a network in another namespace while namespace isolation is on.",
        "Select a network in the Pod's namespace or a global namespace.",
    ),
    INTERFACE_NAME_COLLISION: (
        "Two delegates would create the same interface in the Pod.",
        "Give one of them a distinct interface in the networks annotation.",
    ),
    DELEGATE_NOT_FOUND: (
        "A delegate plugin binary is not on the search path.",
        "Install the plugin into binDir/CNI_PATH or fix the path.",
    ),
    DELEGATE_FAILED: (
        "A delegate plugin failed or could not be executed; the message is the plugin's own.",
        "Read the plugin's message; fix its config or the node.",
    ),
    DELEGATE_VERSION_UNKNOWN: (
        "A delegate plugin's VERSION answer is unusable.",
        "Update or replace the plugin binary.",
    ),
    INCOMPATIBLE_DELEGATE_VERSION: (
        "A delegate network's plugins share no cniVersion with its config.",
        "Set a cniVersion every plugin of that network supports.",
    ),
    INVALID_DELEGATE_RESULT: (
        "A delegate plugin returned a result that is not valid result JSON.",
        "Update or fix the plugin.",
    ),
    INVALID_RESULT: (
        "A CNI result does not have the shape its cniVersion requires.",
        "Update or fix the plugin.",
    ),
    RESULT_NOT_CONVERTIBLE: (
        "A result cannot be converted to the requested cniVersion.",
        "Use the cniVersion the delegate writes, or a delegate that assigns IP addresses.",
    ),
    DEFAULT_ROUTE_FAILED: (
        "Adjusting the default route in the Pod (default-route selection) failed.",
        "Check the gateway in the networks annotation and the delegate's routes.",
    ),
    NETNS_NOT_FOUND: (
        "The ADD's CNI_NETNS names no network namespace; no delegate was added.",
        "Check the runtime's sandbox: it passed a netns path that does not exist (or is gone).",
    ),
    UNKNOWN_CONTAINER: (
        "DEL or CHECK for a container that has no delegate cache: it was never added.",
        "Nothing for DEL; for CHECK, recreate the Pod.",
    ),
    SHADOW_TEARDOWN_INCOMPLETE: (
        "A DEL with no delegate cache, for a Pod that is gone, could not tear down all that the Pod's "
        "managed shadows describe (the reason beside it says why); the DEL succeeded anyway, so the "
        "sandbox goes, and that attachment's address may still be reserved.",
        "Fix what the reason beside it names; then release the container's IPAM reservation by hand "
        "(host-local's file, the whereabouts IPPool entry) if it is still there.",
    ),
    DELEGATE_CACHE_UNREADABLE: (
        "The delegate cache file cannot be read.",
        "Check cniDir's permissions and disk.",
    ),
    DELEGATE_CACHE_CORRUPT: (
        "The delegate cache file is not what ADD wrote.",
        "Remove the named file after cleaning up the Pod's interfaces, or recreate the Pod.",
    ),
    DELEGATE_CACHE_WRITE_FAILED: (
        "The delegate cache cannot be saved.",
        "Make cniDir writable and check the disk.",
    ),
    INVALID_CACHE_KEY: (
        "A container ID or interface would make an unsafe cache file name.",
        "Check the runtime's CNI_CONTAINERID and CNI_IFNAME.",
    ),
    KUBE_API_UNAVAILABLE: (
        "The Kubernetes API did not answer, or answered 429 or 5xx.",
        "Nothing if brief: the runtime retries; otherwise check the API server and the node's network.",
    ),
    KUBE_API_REFUSED: (
        "The Kubernetes API refused a request (4xx).",
        "Check the shim's credentials and RBAC (deploy/), and the object named.",
    ),
    MANAGED_SHADOW_DUPLICATE_SELECTION: (
        "The Pod selects one managed shadow more than once.",
        "Remove the duplicate selection from the networks annotation.",
    ),
    MANAGED_SHADOW_REGISTRY_INVALID: (_GUARD + "the Pod's registry annotation is unusable.", _RECREATE),
    MANAGED_SHADOW_REGISTRY_POD_MISMATCH: (_GUARD + "the registry names another Pod UID.", _RECREATE),
    MANAGED_SHADOW_SELECTION_COUNT: (
        _GUARD + "the networks annotation selects a registered shadow other than once.",
        _RECREATE,
    ),
    MANAGED_SHADOW_SELECTION_OVERRIDE: (
        _GUARD + "the selection overrides what the binding fixes (deviceID, interface, options).",
        "Remove the override from the networks annotation; the driver owns these selections.",
    ),
    MANAGED_SHADOW_CONFIG_NOT_STATIC_SRIOV: (
        _GUARD + "spec.config is not one sriov plugin with a static deviceID (plus allowed metaplugins).",
        _RECREATE,
    ),
    MANAGED_SHADOW_PCI_MISMATCH: (
        _GUARD + "the config's deviceID or pciBusID differs from the bound VF.",
        _RECREATE,
    ),
    MANAGED_SHADOW_BINDING_INVALID: (_GUARD + "the shadow's binding annotation is unusable.", _RECREATE),
    MANAGED_SHADOW_POD_MISMATCH: (_GUARD + "the shadow is bound to another Pod UID.", _RECREATE),
    MANAGED_SHADOW_NODE_MISMATCH: (_GUARD + "the shadow is bound to another node.", _RECREATE),
    MANAGED_SHADOW_NAMESPACE_MISMATCH: (_GUARD + "the shadow is not in the Pod's namespace.", _RECREATE),
    MANAGED_SHADOW_OWNER_MISMATCH: (_GUARD + "the shadow is not owned by the Pod.", _RECREATE),
    MANAGED_SHADOW_UNPROTECTED: (_GUARD + "the shadow lacks the protection finalizer.", _RECREATE),
    MANAGED_SHADOW_TERMINATING: (_GUARD + "the shadow is being deleted.", "Recreate the Pod."),
    MANAGED_SHADOW_HAS_RESOURCE_NAME: (
        _GUARD + "the shadow carries a device-plugin resourceName annotation.",
        _RECREATE,
    ),
    MANAGED_SHADOW_CONFIG_HASH_MISMATCH: (
        _GUARD + "spec.config differs from the bytes the driver rendered.",
        _RECREATE,
    ),
    MANAGED_SHADOW_NOT_REGISTERED: (
        _GUARD + "the Pod's registry does not list the shadow's attachment exactly once.",
        _RECREATE,
    ),
    MANAGED_SHADOW_REGISTRY_MISMATCH: (
        _GUARD + "the registry entry disagrees with the shadow or binding (name, UID, hash, interface).",
        _RECREATE,
    ),
    VIRTUAL_FUNCTION_NOT_ALLOCATED: (
        "A network the Pod selects names an SR-IOV virtual function of this node (deviceID, pciBusID, "
        "a host-device device, at runtime or in its config) that neither a managed shadow bound to "
        "the Pod nor the kubelet's device-plugin allocation for the NAD's resourceName gives it; "
        "no delegate ran and the VF stayed on the host.",
        "Ask for the VF through a ResourceClaim (DRA) or the device plugin's resource; a namespace "
        "that must use static device NADs goes into staticDeviceNamespaces (docs/cni-shim.md).",
    ),
    POD_RESOURCES_UNAVAILABLE: (
        "A selected NAD carries k8s.v1.cni.cncf.io/resourceName and the kubelet's pod-resources "
        "socket exists, but it could not be reached or its List call failed (10 s each); no delegate ran.",
        "Check the kubelet on this node (podResourcesSocket, default "
        "/var/lib/kubelet/pod-resources/kubelet.sock); the runtime retries the ADD.",
    ),
    DEVICE_CHECKPOINT_UNREADABLE: (
        "A selected NAD carries k8s.v1.cni.cncf.io/resourceName, the pod-resources socket is absent "
        "and the kubelet's device-plugin checkpoint could not be read or is not JSON; no delegate ran.",
        "Check deviceCheckpointFile (default /var/lib/kubelet/device-plugins/kubelet_internal_checkpoint) "
        "or expose the kubelet's pod-resources socket to the shim.",
    ),
    DAEMON_UNAVAILABLE: (
        "Thick mode: cni-shim-daemon is not serving its socket.",
        "Check the cni-shim-daemon Pod on this node; the runtime retries.",
    ),
    DAEMON_TIMEOUT: (
        "Thick mode: cni-shim-daemon did not answer in time; the request may still complete.",
        "Nothing if rare: the runtime retries; otherwise check the daemon's load and log.",
    ),
    DAEMON_PROTOCOL_ERROR: (
        "Thick mode: the daemon's answer is not what the shim expects.",
        "Run the same version of the shim and the daemon.",
    ),
    DAEMON_REPORTED_ERROR: (
        "Thick mode: the daemon's own CNI error, passed on unchanged (its details name the real reason).",
        "Act on the reason at the start of the error's details.",
    ),
    MALFORMED_DAEMON_REQUEST: (
        "Thick mode: the daemon received a request the shim does not send.",
        "Run the same version of the shim and the daemon.",
    ),
    DAEMON_CONFIG_UNREADABLE: ("cni-shim-daemon cannot read its config file.", "Mount the daemon config."),
    DAEMON_CONFIG_MALFORMED: (
        "cni-shim-daemon's config file is not a JSON object.",
        "Fix the daemon config.",
    ),
    AUTOCONF_FAILED: (
        "multusConfigFile auto: the daemon found no usable primary CNI config in multusAutoconfigDir "
        "(none there, unreadable, or a cniVersion below 0.4.0 under a top level of 0.4.0 or later), "
        "so it writes no 00-multus.conf and stops.",
        "Install the cluster's default network first, or align the cniVersions (forceCNIVersion).",
    ),
    INTERNAL_ERROR: ("The CNI shim failed unexpectedly (a bug).", "Report it with the message and the log."),
}
