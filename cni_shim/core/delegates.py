"""Building the delegate list exactly as Multus does (pure: confDir is read through cni_shim.ports.ConfFiles).

Order: cluster network (master) + defaultNetworks + the networks annotation; the
v1.multus-cni.io/default-network annotation replaces the master. NAD configs come inline or from
confDir, a missing name is filled from metadata.name, and per-selection cni-args are merged into
args.cni. Interface names follow Multus's getIfname with non-compacted indices, and the whole
list is collision-checked before anything runs.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence

from cni_shim import reasons
from cni_shim.core import jsonbytes, network
from cni_shim.core.network import Network
from cni_shim.core.protocol import validate_ifname
from cni_shim.errors import INVALID_NETWORK_CONFIG, ApiError, CniError, config_error
from sriov_contract import keys
from sriov_contract import reasons as contract_reasons
from sriov_contract.networks import NetworkSelection, parse_network_selections
from sriov_lib.rawjson import JsonObject
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.ports import ConfFiles

DEFAULT_NETWORK_ANNOTATION = "v1.multus-cni.io/default-network"
_CONF_EXTENSIONS = (".conf", ".json", ".conflist")
# The capability key naming an attachment's device-info file (Multus's CNIDeviceInfoFile).
DEVICE_INFO_FILE = "CNIDeviceInfoFile"
_DEVINFO_DIR = "/var/run/k8s.cni.cncf.io/devinfo/cni/"

NadGetter = Callable[[str, str], "dict[str, Any] | None"]


class Candidate(TypedTuple):
    """A delegate before interface naming: its name, its parsed config (which keeps the exact
    bytes) and the selection behind it."""

    name: str
    network: Network
    master: bool = False
    selection: NetworkSelection | None = None
    managed: bool = False
    # Device access (cni_shim.core.deviceaccess): the VF a verified managed shadow binds to this
    # Pod, the NAD's device-plugin resourceName (None: the NAD has no such annotation; an empty
    # value still enters Multus's lookup), and, on a DEL, why a managed shadow is not this Pod's
    # (that delegate is then never run).
    bound_pci: str = ""
    resource_name: str | None = None
    foreign: str = ""
    # The network-status device-info of a verified shadow that carries the driver's (spec 10.4).
    device_info: dict[str, Any] | None = None
    # The device the resourceName path gave this delegate (cni_shim.core.resourcenames).
    device_id: str = ""


def _err(reason: str, message: str) -> CniError:
    return CniError(reason, message, INVALID_NETWORK_CONFIG)


def find_in_dir(wanted: str, directory: str, files: ConfFiles) -> Network:
    """NAD-client GetCNIConfigFromFile: the first file (by name) whose network name matches."""
    try:
        names = sorted(f for f in files.list_dir(directory) if f.endswith(_CONF_EXTENSIONS))
    except OSError:
        names = []
    if not names:
        raise _err(reasons.NO_NETWORK_FOUND, f"No networks found in {directory}")
    for fname in names:
        path = posixpath.join(directory, fname)
        data = _read_file(files, path)
        # The NAD client's wording: "Error loading CNI con(f|flist) file <path>: <libcni's error>".
        kind = "conflist" if fname.endswith(".conflist") else "config"
        try:
            net = network.parse(data, f"CNI {kind} file {path}")
        except CniError as exc:
            raise _err(
                reasons.INVALID_NETWORK_FILE,
                f"Error loading CNI {kind} file {path}: error parsing configuration: {exc.message}",
            ) from exc
        if fname.endswith(".conflist") != net.conflist:
            raise _err(
                reasons.INVALID_NETWORK_FILE,
                f"Error loading CNI {kind} file {path}: error parsing configuration: "
                + ("no 'plugins' key" if net.conflist is False else "missing 'type'"),
            )
        if wanted in ("", net.name):
            return net
    raise _err(reasons.NO_NETWORK_FOUND, f"no network available in the name {wanted} in cni dir {directory}")


def _read_file(files: ConfFiles, path: str) -> bytes:
    try:
        return files.read(path)
    except OSError as exc:
        raise _err(
            reasons.INVALID_NETWORK_FILE, f"cannot read CNI config file {path}: {exc.strerror}"
        ) from exc


def spec_config(nad: Mapping[str, Any]) -> bytes:
    """The exact UTF-8 bytes of a NAD's spec.config (empty for file-backed NADs)."""
    meta = nad.get("metadata") or {}
    what = f"NetworkAttachmentDefinition {meta.get('namespace')}/{meta.get('name')}"
    spec = nad.get("spec") or {}
    text = spec.get("config", "") if isinstance(spec, dict) else ""
    if not isinstance(text, str):
        raise config_error(f"{what}: spec.config must be a string")
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise config_error(f"{what}: spec.config is not valid Unicode text ({exc.reason})") from exc


def nad_network(nad: Mapping[str, Any], conf_dir: str, files: ConfFiles, what: str) -> Network:
    """NAD -> its network: empty spec.config means a file in confDir; an absent name is filled in.

    `what` names the NAD in a parse error (Multus's delegate loader words it so)."""
    meta = nad.get("metadata") or {}
    nad_name = str(meta.get("name", ""))
    raw = spec_config(nad)
    if not raw:
        try:
            return find_in_dir(nad_name, conf_dir, files)
        except CniError as exc:
            raise exc.wrap("GetCNIConfig: err in GetCNIConfigFromFile: ") from exc
    obj = network.decode(
        raw, f"spec.config of NetworkAttachmentDefinition {meta.get('namespace')}/{nad_name}"
    )
    if obj.get("name") in (None, ""):
        obj["name"] = nad_name
        raw = jsonbytes.dumps_sorted(obj).encode()
    return network.parse(raw, what)


def _merge_cni_args(target: JsonObject, cni_args: JsonObject) -> None:
    args = target.get("args")
    if not isinstance(args, dict):
        target["args"] = JsonObject(cni=JsonObject(cni_args))
        return
    existing = args.get("cni")
    merged = JsonObject(existing) if isinstance(existing, dict) else JsonObject()
    merged.update(cni_args)
    args["cni"] = merged


def load(conf: bytes, selection: NetworkSelection | None, what: str, managed: bool = False) -> Candidate:
    """Multus LoadDelegateNetConf: validate the shape, merge cni-args, name the delegate."""
    return candidate(network.parse(conf, what), selection, what, managed)


def candidate(
    net: Network, selection: NetworkSelection | None, what: str, managed: bool = False
) -> Candidate:
    """load() of a network already parsed: the selection's cni-args merged in, the delegate named.

    Merging writes a new config (a fresh, mutable decode of the bytes), parsed once more: the
    delegate runs with exactly those bytes."""
    name = f"{selection.namespace}/{selection.name}" if selection is not None and selection.name else net.name
    if selection is not None and selection.cni_args:
        obj = network.decode(net.raw, what)
        for plugin in obj["plugins"] if net.conflist else [obj]:  # type: ignore[union-attr]
            _merge_cni_args(plugin, selection.cni_args)  # type: ignore[arg-type]
        net = network.parse(jsonbytes.dumps_sorted(obj).encode(), what)
    return Candidate(name=name, network=net, selection=selection, managed=managed)


def with_device_id(cand: Candidate, device_id: str, what: str) -> Candidate:
    """Multus's deviceID injection: `deviceID` and `pciBusID` at the top of a single config, in
    every plugin of a conflist; the config is written anew with sorted keys."""
    obj = network.decode(cand.network.raw, what)
    for plugin in obj["plugins"] if cand.network.conflist else [obj]:  # type: ignore[union-attr]
        plugin["deviceID"] = device_id  # type: ignore[call-overload,index]
        plugin["pciBusID"] = device_id  # type: ignore[call-overload,index]
    net = network.parse(jsonbytes.dumps_sorted(obj).encode(), what)
    return cand._replace(network=net, device_id=device_id)


def resource_name(nad: Mapping[str, Any]) -> str | None:
    """The NAD's device-plugin resourceName annotation, None when the key is absent."""
    value = ((nad.get("metadata") or {}).get("annotations") or {}).get(keys.RESOURCE_NAME_ANNOTATION)
    return value if isinstance(value, str) else None


def resolve_network(
    value: str, namespace: str, conf_dir: str, get_nad: NadGetter | None, files: ConfFiles
) -> Candidate:
    """clusterNetwork/defaultNetworks entry: NAD, then CNI name in confDir, or a file/dir path."""
    if "/" not in value:
        if get_nad is not None:
            try:
                nad = get_nad(namespace, value)
                if nad is not None:
                    what = f"NetworkAttachmentDefinition {namespace}/{value}"
                    cand = candidate(nad_network(nad, conf_dir, files, what), None, what)
                    return cand._replace(name=f"{namespace}/{value}", resource_name=resource_name(nad))
            except ApiError:
                raise  # an unreachable API fails visibly; a local file is no stand-in for a live read
            except CniError:
                pass  # Multus falls through to a confDir lookup on a missing or unusable NAD
        try:
            return candidate(find_in_dir(value, conf_dir, files), None, f"network {value} in {conf_dir}")
        except CniError as exc:
            raise _err(reasons.NO_NETWORK_FOUND, f"cannot find network: {value}") from exc
    if files.is_dir(value):
        names = sorted(f for f in files.list_dir(value) if f.endswith(_CONF_EXTENSIONS))
        if not names:
            raise _err(reasons.NO_NETWORK_FOUND, f"cannot find network: {value}")
        value = posixpath.join(value, names[0])
    return load(_read_file(files, value), None, f"CNI config file {value}")


def default_network_selection(pod: Mapping[str, Any], default_namespace: str) -> NetworkSelection | None:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if DEFAULT_NETWORK_ANNOTATION not in annotations:
        return None
    value = annotations[DEFAULT_NETWORK_ANNOTATION]
    selections = parse_network_selections(value, default_namespace) if value else []
    if len(selections) > 1:
        raise config_error(
            "TryLoadPodDelegates: error in loading K8s cluster default network from pod annotation: "
            f"tryLoadK8sPodDefaultNetwork: more than one default network is specified: {value}"
        )
    if not selections:  # Multus indexes the empty list and panics; we name the problem
        raise config_error(
            f"annotation {DEFAULT_NETWORK_ANNOTATION} must name exactly one network, got {value!r}; fix the Pod annotation"
        )
    return selections[0]


def check_isolation(
    selections: Sequence[NetworkSelection], pod_namespace: str, global_namespaces: Sequence[str]
) -> None:
    for sel in selections:
        if sel.namespace != pod_namespace and sel.namespace not in global_namespaces:
            raise CniError(
                reasons.NAMESPACE_ISOLATION_VIOLATION,
                "GetNetworkDelegates: namespace isolation enabled, annotation violates permission, "
                f"pod is in namespace {pod_namespace} but refers to target namespace {sel.namespace}",
                INVALID_NETWORK_CONFIG,
            )


def ifnames(candidates: Sequence[Candidate], runtime_ifname: str) -> list[str]:
    """Multus getIfname over the final list, then the collision check the spec requires."""
    names = []
    for idx, cand in enumerate(candidates):
        if cand.selection is not None and cand.selection.interface:
            names.append(cand.selection.interface)
        elif cand.master:
            names.append(runtime_ifname)
        else:
            names.append(f"net{idx}")
    seen: dict[str, str] = {}
    for cand, name in zip(candidates, names, strict=True):
        if problem := validate_ifname(name):
            raise _err(contract_reasons.INVALID_INTERFACE_NAME, f"delegate {cand.name}: {problem} ({name!r})")
        if name in seen:
            raise _err(
                reasons.INTERFACE_NAME_COLLISION,
                f"delegates {seen[name]} and {cand.name} would both create interface {name}; "
                "give one of them a distinct interface in the networks annotation",
            )
        seen[name] = cand.name
    return names


def capability_args(
    cand: Candidate, runtime_config: Mapping[str, Any], container_id: str, ifname: str
) -> dict[str, Any]:
    """Multus §4.7: the runtime's capability args, overridden per selection for non-master delegates."""
    caps = dict(runtime_config)
    sel = cand.selection
    if sel is not None and not cand.master:
        if sel.port_mappings:
            caps["portMappings"] = [
                {
                    "hostPort": p.host_port,
                    "containerPort": p.container_port,
                    **({"protocol": p.protocol} if p.protocol else {}),
                    **({"hostIP": p.host_ip} if p.host_ip else {}),
                }
                for p in sel.port_mappings
            ]
        if sel.bandwidth is not None:
            b = sel.bandwidth
            caps["bandwidth"] = {
                "ingressRate": b.ingress_rate,
                "ingressBurst": b.ingress_burst,
                "egressRate": b.egress_rate,
                "egressBurst": b.egress_burst,
            }
        if sel.ips:
            caps["ips"] = list(sel.ips)
        if sel.mac:
            caps["mac"] = sel.mac
        if sel.infiniband_guid:
            caps["infinibandGUID"] = sel.infiniband_guid
        # A device from the resourceName path wins over the selection's (Multus ignores the latter).
        if cand.device_id or sel.device_id:
            caps["deviceID"] = cand.device_id or sel.device_id
    if caps.get("deviceID") or cand.device_info:
        caps[DEVICE_INFO_FILE] = _DEVINFO_DIR + f"{cand.name}-{container_id}_{ifname}".replace("/", "-")
    return {k: v for k, v in caps.items() if v not in (None, "", [], {})}


def add_args(cand: Candidate) -> tuple[tuple[str, str], ...]:
    """The deprecated MAC=/IP= CNI_ARGS Multus appends on ADD (master included)."""
    sel = cand.selection
    if sel is None:
        return ()
    extra = []
    if sel.mac:
        extra.append(("MAC", sel.mac))
    if sel.ips:
        extra.append(("IP", ",".join(sel.ips)))
    return tuple(extra)


def _asks_default_route(sel: NetworkSelection | None) -> bool:
    # Presence counts, even as []: Go decodes a present list to non-nil; null stays nil.
    return sel is not None and any(k.lower() == "default-route" and v is not None for k, v in sel.raw.items())


def route_override(candidates: Sequence[Candidate]) -> bool:
    """Multus §5.3: once any selection carries default-route, every interface's defaults are replaced."""
    return any(_asks_default_route(c.selection) for c in candidates)


def check_default_routes(candidates: Sequence[Candidate]) -> None:
    """Multus refuses more than one requested default gateway per address family (no ECMP)."""
    v4 = v6 = 0
    for cand in candidates:
        for gw in cand.selection.default_route if cand.selection is not None else ():
            if ":" in gw:
                v6 += 1
            else:
                v4 += 1
    if v4 > 1 or v6 > 1:
        raise config_error("multus does not support ECMP for default-route")
