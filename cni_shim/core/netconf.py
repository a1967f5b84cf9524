"""The shim's own network configuration: Multus's keys, Multus's defaults, plus liveNetworkConfigOnAdd,
podEvents (Multus's Pod Events, on unless false) and the device-access settings (sysfsRoot,
deviceCheckpointFile, staticDeviceNamespaces: cni_shim.core.deviceaccess).

Go's JSON decoder matches field names case-insensitively, so an existing 00-multus.conf that
spells a key differently still works; we fold the known keys the same way.
"""

from __future__ import annotations

from cni_shim import reasons
from cni_shim.core import network
from cni_shim.errors import DECODE_FAILURE, CniError, config_error
from sriov_lib import quickjson
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

DEFAULT_CONF_DIR = "/etc/cni/multus/net.d"
DEFAULT_CNI_DIR = "/var/lib/cni/multus"
DEFAULT_BIN_DIR = "/opt/cni/bin"
DEFAULT_SYSFS_ROOT = "/sys"
# Where the kubelet's device manager keeps its allocations (cni_shim.core.kubeletcheckpoint).
DEFAULT_DEVICE_CHECKPOINT = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
# Where the kubelet serves its pod-resources API (Multus's fixed path; cni_shim.handler.resourcelookup).
DEFAULT_POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
DEFAULT_MAX_PARALLEL_DELEGATES = 8
# Only these runtime capability args survive into delegates (Multus's RuntimeConfig struct).
RUNTIME_CONFIG_KEYS = (
    "portMappings",
    "bandwidth",
    "ips",
    "mac",
    "infinibandGUID",
    "deviceID",
    "CNIDeviceInfoFile",
)

_KNOWN = (
    "cniVersion",
    "name",
    "type",
    "kubeconfig",
    "clusterNetwork",
    "defaultNetworks",
    "delegates",
    "confDir",
    "cniDir",
    "binDir",
    "logFile",
    "logLevel",
    "logToStderr",
    "runtimeConfig",
    "readinessindicatorfile",
    "namespaceIsolation",
    "globalNamespaces",
    "systemNamespaces",
    "multusNamespace",
    "retryDeleteOnError",
    "liveNetworkConfigOnAdd",
    "podEvents",
    "sysfsRoot",
    "deviceCheckpointFile",
    "podResourcesSocket",
    "staticDeviceNamespaces",
    "maxParallelDelegates",
    "parallelOrdinaryDelegates",
    "prevResult",
    "cni.dev/valid-attachments",
    "cni.dev/attachments",
)
_FOLD = {k.lower(): k for k in _KNOWN}


class NetConf(TypedTuple):
    cni_version: str
    name: str
    kubeconfig: str = ""
    cluster_network: str = ""
    default_networks: tuple[str, ...] = ()
    delegates: tuple[network.Network, ...] = ()
    conf_dir: str = DEFAULT_CONF_DIR
    cni_dir: str = DEFAULT_CNI_DIR
    bin_dir: str = DEFAULT_BIN_DIR
    log_file: str = ""
    log_level: str = ""
    log_to_stderr: bool = True
    runtime_config: dict[str, Any] = {}
    readiness_indicator_file: str = ""
    namespace_isolation: bool = False
    global_namespaces: tuple[str, ...] = ("default",)
    system_namespaces: tuple[str, ...] = ("kube-system",)
    multus_namespace: str = "kube-system"
    retry_delete_on_error: bool = False
    live_network_config_on_add: bool = False
    pod_events: bool = True
    sysfs_root: str = DEFAULT_SYSFS_ROOT
    device_checkpoint_file: str = DEFAULT_DEVICE_CHECKPOINT
    pod_resources_socket: str = DEFAULT_POD_RESOURCES_SOCKET
    # Namespaces whose Pods may take devices by name (static deviceID NADs): the administrator's opt-out.
    static_device_namespaces: tuple[str, ...] = ()
    # How many delegates of one Pod may run at once (cni_shim.core.delegatewaves); 1 is Multus's
    # serial order. Eight covers an eight-rail Pod's shadows in one wave.
    max_parallel_delegates: int = DEFAULT_MAX_PARALLEL_DELEGATES
    # Whether ordinary NADs (not managed shadows) may overlap too: the administrator's opt-in.
    parallel_ordinary_delegates: bool = False
    valid_attachments: tuple[tuple[str, str], ...] | None = None


def decode_object(stdin: bytes) -> dict[str, Any]:
    try:
        raw = quickjson.loads(stdin)
    except (ValueError, RecursionError) as exc:
        raise CniError(  # skel's wording
            reasons.MALFORMED_NETWORK_CONFIG, f"error unmarshall network config: {exc}", DECODE_FAILURE
        ) from exc
    if not isinstance(raw, dict):
        raise CniError(
            reasons.MALFORMED_NETWORK_CONFIG,
            f"network config must be a JSON object, got {type(raw).__name__}",
            DECODE_FAILURE,
        )
    return raw


def _typed(raw: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    if key not in raw:
        return default
    value = raw[key]
    if kind is bool and not isinstance(value, bool):
        raise CniError(
            reasons.INVALID_NETWORK_CONFIG, f"{key} must be a boolean, got {value!r:.80}", DECODE_FAILURE
        )
    if not isinstance(value, kind):
        raise CniError(
            reasons.INVALID_NETWORK_CONFIG,
            f"{key} must be {getattr(kind, '__name__', kind)}, got {type(value).__name__}",
            DECODE_FAILURE,
        )
    return value


def _strings(raw: dict[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = _typed(raw, key, list, None)
    if value is None:
        return default if key not in raw else ()
    if not all(isinstance(v, str) for v in value):
        raise CniError(reasons.INVALID_NETWORK_CONFIG, f"{key} must be a list of strings", DECODE_FAILURE)
    return tuple(value)


def _parallelism(raw: dict[str, Any]) -> int:
    value = raw.get("maxParallelDelegates", DEFAULT_MAX_PARALLEL_DELEGATES)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise config_error(f"maxParallelDelegates must be a whole number of at least 1, got {value!r:.80}")
    return value


def _attachments(raw: dict[str, Any]) -> tuple[tuple[str, str], ...] | None:
    key = "cni.dev/valid-attachments" if "cni.dev/valid-attachments" in raw else "cni.dev/attachments"
    if key not in raw:
        return None
    value = raw[key]
    if value is None:
        return ()
    if not isinstance(value, list):
        raise config_error(f"{key} must be a list of {{containerID, ifname}} objects")
    out = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("containerID"), str):
            raise config_error(f"{key} entries must be objects with a string containerID, got {item!r:.80}")
        out.append((item["containerID"], str(item.get("ifname", ""))))
    return tuple(out)


def fold(obj: dict[str, Any]) -> dict[str, Any]:
    """Go's decoder matches field names case-insensitively; fold the known keys to their spelling."""
    return {_FOLD.get(k.lower(), k): v for k, v in obj.items()}


def load(raw: dict[str, Any]) -> NetConf:
    """Interpret an already decoded and folded shim config (skel checks passed) with Multus defaults."""
    version = _typed(raw, "cniVersion", str, "")
    delegates_raw = _typed(raw, "delegates", list, []) or []
    cluster = _typed(raw, "clusterNetwork", str, "")
    if not delegates_raw and not cluster:
        raise config_error("LoadNetConf: at least one delegate/clusterNetwork must be specified")
    delegates: list[network.Network] = []
    if not cluster:
        for idx, item in enumerate(delegates_raw):
            if not isinstance(item, dict):
                raise config_error(
                    f"LoadNetConf: failed to load delegate {idx} config: it must be a JSON object"
                )
            encoded = quickjson.dumps(item, sort_keys=True, separators=(",", ":")).encode()
            delegates.append(network.parse(encoded, f"LoadNetConf: failed to load delegate {idx} config"))
    global_ns = _typed(raw, "globalNamespaces", str, "")
    runtime = _typed(raw, "runtimeConfig", dict, {}) or {}
    conf = NetConf(
        cni_version=version,
        name=_typed(raw, "name", str, ""),
        kubeconfig=_typed(raw, "kubeconfig", str, ""),
        cluster_network=cluster,
        default_networks=_strings(raw, "defaultNetworks", ()),
        delegates=tuple(delegates),
        conf_dir=_typed(raw, "confDir", str, DEFAULT_CONF_DIR),
        cni_dir=_typed(raw, "cniDir", str, DEFAULT_CNI_DIR),
        bin_dir=_typed(raw, "binDir", str, DEFAULT_BIN_DIR),
        log_file=_typed(raw, "logFile", str, ""),
        log_level=_typed(raw, "logLevel", str, ""),
        log_to_stderr=_typed(raw, "logToStderr", bool, True),
        runtime_config={k: runtime[k] for k in RUNTIME_CONFIG_KEYS if k in runtime},
        readiness_indicator_file=_typed(raw, "readinessindicatorfile", str, ""),
        namespace_isolation=_typed(raw, "namespaceIsolation", bool, False),
        global_namespaces=tuple(s.strip() for s in global_ns.split(",")) if global_ns else ("default",),
        system_namespaces=_strings(raw, "systemNamespaces", ("kube-system",)),
        multus_namespace=_typed(raw, "multusNamespace", str, "kube-system"),
        retry_delete_on_error=_typed(raw, "retryDeleteOnError", bool, False),
        live_network_config_on_add=_typed(raw, "liveNetworkConfigOnAdd", bool, False),
        pod_events=_typed(raw, "podEvents", bool, True),
        sysfs_root=_typed(raw, "sysfsRoot", str, DEFAULT_SYSFS_ROOT) or DEFAULT_SYSFS_ROOT,
        device_checkpoint_file=_typed(raw, "deviceCheckpointFile", str, DEFAULT_DEVICE_CHECKPOINT)
        or DEFAULT_DEVICE_CHECKPOINT,
        pod_resources_socket=_typed(raw, "podResourcesSocket", str, DEFAULT_POD_RESOURCES_SOCKET)
        or DEFAULT_POD_RESOURCES_SOCKET,
        static_device_namespaces=_strings(raw, "staticDeviceNamespaces", ()),
        max_parallel_delegates=_parallelism(raw),
        parallel_ordinary_delegates=_typed(raw, "parallelOrdinaryDelegates", bool, False),
        valid_attachments=_attachments(raw),
    )
    if "prevResult" in raw and raw["prevResult"] is not None:
        from cni_shim.core import results  # noqa: PLC0415 - only DEL/CHECK carry a prevResult

        results.to_current(raw["prevResult"], version)
    return conf
