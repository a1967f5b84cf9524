"""The delegate plan: everything DEL, CHECK and GC need, frozen at ADD time before any delegate runs.

Stored as versioned JSON at <cniDir>/<containerID>. Delegate config bytes are kept exactly
(base64), so plugin-specific keys and number text survive into teardown.
"""

from __future__ import annotations

import binascii

from cni_shim import reasons
from cni_shim.core import network
from cni_shim.core.network import Network
from cni_shim.errors import CniError
from sriov_lib import quickjson
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

KIND = "cniShimDelegatesV1"


class PlannedDelegate(TypedTuple):
    name: str
    conf: bytes
    ifname: str
    cni_version: str
    master: bool = False
    managed: bool = False
    capability_args: dict[str, Any] = {}
    cni_args: tuple[tuple[str, str], ...] = ()
    add_args: tuple[tuple[str, str], ...] = ()
    # Multus default-route handling (ADD only): replace this interface's default routes.
    route_override: bool = False
    default_route: tuple[str, ...] = ()
    # Multus device-info for network-status and the CNIDeviceInfoFile its capability args name.
    device_info: dict[str, Any] = {}
    # `conf` as the request that planned this delegate parsed it; never stored. A plan read back
    # from disk has none, and parses its bytes where a verb first needs them (so a damaged entry
    # fails that verb, not the reading of the plan).
    parsed: Network | None = None
    # ADD only, never stored: the device plugin's device-info file to copy to CNIDeviceInfoFile
    # before this delegate's ADD (the resourceName path), "" for none.
    device_info_source: str = ""

    def network(self) -> Network:
        if self.parsed is not None:
            return self.parsed
        return network.parse(self.conf, f"delegate {self.name}")


class Plan(TypedTuple):
    container_id: str
    netns: str
    ifname: str
    pod_namespace: str
    pod_name: str
    pod_uid: str
    delegates: tuple[PlannedDelegate, ...]

    def to_bytes(self) -> bytes:
        doc = {
            "kind": KIND,
            "containerID": self.container_id,
            "netns": self.netns,
            "ifname": self.ifname,
            "pod": {"namespace": self.pod_namespace, "name": self.pod_name, "uid": self.pod_uid},
            "delegates": [
                {
                    "name": d.name,
                    "conf": binascii.b2a_base64(d.conf, newline=False).decode(),
                    "ifname": d.ifname,
                    "cniVersion": d.cni_version,
                    "master": d.master,
                    "managed": d.managed,
                    "capabilityArgs": d.capability_args,
                    "cniArgs": [list(p) for p in d.cni_args],
                    "addArgs": [list(p) for p in d.add_args],
                    # Only when there is some: plans without it keep their bytes.
                    **({"deviceInfo": d.device_info} if d.device_info else {}),
                }
                for d in self.delegates
            ],
        }
        # Compact: an indented dump is a pure-Python walk (json's and quickjson's alike, a tenth
        # of a millisecond of every ADD); the file is for this code to read back, not for people.
        return quickjson.dumps(doc).encode()


def _pairs(value: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in value)


def from_bytes(data: bytes, where: str) -> Plan:
    """Decode a stored plan; a damaged file is an error the caller decides how to report."""
    try:
        doc = quickjson.loads(data)
        if doc.get("kind") != KIND:
            raise ValueError(f"unknown kind {doc.get('kind')!r}")
        pod = doc["pod"]
        return Plan(
            container_id=str(doc["containerID"]),
            netns=str(doc["netns"]),
            ifname=str(doc["ifname"]),
            pod_namespace=str(pod["namespace"]),
            pod_name=str(pod["name"]),
            pod_uid=str(pod["uid"]),
            delegates=tuple(
                PlannedDelegate(
                    name=str(d["name"]),
                    conf=binascii.a2b_base64(d["conf"], strict_mode=True),
                    ifname=str(d["ifname"]),
                    cni_version=str(d["cniVersion"]),
                    master=bool(d["master"]),
                    managed=bool(d.get("managed", False)),
                    capability_args=dict(d["capabilityArgs"]),
                    cni_args=_pairs(d["cniArgs"]),
                    add_args=_pairs(d.get("addArgs", [])),
                    device_info=dict(d.get("deviceInfo") or {}),
                )
                for d in doc["delegates"]
            ),
        )
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
        raise CniError(
            reasons.DELEGATE_CACHE_CORRUPT, f"the delegate cache {where} is unreadable: {exc}"
        ) from exc


def from_multus(
    data: bytes,
    where: str,
    *,
    identity: Plan,
    cni_args: tuple[tuple[str, str], ...],
    cni_version: str,
    runtime_config: dict[str, Any],
) -> Plan:
    """Adopt a cache Multus wrote (JSON list of DelegateNetConf) so an in-place upgrade can DEL.

    Multus stores no interface names; they are recomputed with its getIfname rules from the
    runtime's CNI_IFNAME, exactly as Multus's own DEL does. `identity` carries this
    invocation's container, netns, ifname and Pod; its delegate list is not used.
    """
    try:
        entries = quickjson.loads(data)
        delegates = []
        for idx, entry in enumerate(entries):
            conf = binascii.a2b_base64(entry["Bytes"], strict_mode=True)
            master = idx == 0
            caps = dict(runtime_config)
            if not master:
                for key, field_name in (
                    ("mac", "macRequest"),
                    ("ips", "ipRequest"),
                    ("deviceID", "deviceID"),
                ):
                    if entry.get(field_name):
                        caps[key] = entry[field_name]
            delegates.append(
                PlannedDelegate(
                    name=str(entry.get("Name", "")),
                    conf=conf,
                    ifname=str(entry.get("ifnameRequest") or (identity.ifname if master else f"net{idx}")),
                    cni_version=str(quickjson.loads(conf).get("cniVersion") or cni_version),
                    master=master,
                    capability_args=caps,
                    cni_args=cni_args,
                )
            )
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as exc:
        raise CniError(
            reasons.DELEGATE_CACHE_CORRUPT, f"the Multus delegate cache {where} is unreadable: {exc}"
        ) from exc
    return Plan(
        container_id=identity.container_id,
        netns=identity.netns,
        ifname=identity.ifname,
        pod_namespace=identity.pod_namespace,
        pod_name=identity.pod_name,
        pod_uid=identity.pod_uid,
        delegates=tuple(delegates),
    )
