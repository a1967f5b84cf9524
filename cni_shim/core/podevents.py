"""The Kubernetes Events Multus records on a Pod during ADD, as core/v1 Event objects (pure).

Multus (`pkg/multus/multus.go: DelegateAdd`, `pkg/k8sclient: getKubernetesDelegate`) records, through
client-go's recorder with source component `multus`:

- `Normal AddedInterface "Add <ifname> [<ip/prefix> ...] from <delegate name>"` for each delegate
  whose result (converted to 1.x) has interfaces or IPs (`"Add <ifname> [...]"` when the delegate
  has no name);
- `Warning NoNetworkFound "cannot find a network-attachment-definition (<name>) in namespace (<ns>): <error>"`
  when a selected NAD cannot be read.

The objects built here are what client-go's recorder POSTs (`makeEvent`): name `<pod>.<hex unix
nanoseconds>`, the Pod's reference as involvedObject, first/last timestamp, count 1.

One ADD writes at most one Event (`combine`): Multus records one AddedInterface per interface and
then leans on client-go's broadcaster to aggregate and rate-limit them (after the first burst a
Pod gets about one patch per five minutes); writing the ADD's interfaces as one Event keeps the
reason and each interface's Multus text while costing one API write per ADD, not one per delegate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from cni_shim import reasons
from cni_shim.core import results, versions
from cni_shim.errors import CniError

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    Json = dict[str, Any]


COMPONENT = "multus"
NORMAL = "Normal"
WARNING = "Warning"
ADDED_INTERFACE = "AddedInterface"
NO_NETWORK_FOUND = reasons.NO_NETWORK_FOUND  # the Event reason is the failure's reason
# The NotFound text of a NAD read: the API server's (live GET) and the NAD lister's (informer cache).
_LIVE_RESOURCE = "network-attachment-definitions.k8s.cni.cncf.io"
_CACHED_RESOURCE = "networkattachmentdefinition.k8s.cni.cncf.io"


def pod_reference(pod: Mapping[str, Any]) -> Json:
    """reference.GetReference of a Pod: the involvedObject of every Event about it."""
    meta = pod.get("metadata") or {}
    ref: Json = {"kind": "Pod", "apiVersion": "v1"}
    for key in ("namespace", "name", "uid", "resourceVersion"):
        if meta.get(key):
            ref[key] = str(meta[key])
    return ref


def _has_addresses(result: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    # Go's `res.Interfaces != nil || res.IPs != nil`: a 1.x result that names the key (even as
    # []) counts; an older result converted to 1.x has the lists only when they hold something.
    version = result.get("cniVersion")
    if isinstance(version, str) and versions.at_least(version, "1.0.0"):
        return any(result.get(key) is not None for key in ("interfaces", "ips"))
    return bool(current.get("interfaces") or current.get("ips"))


def added_interface_message(ifname: str, result: Mapping[str, Any], delegate_name: str) -> str | None:
    """The AddedInterface message for one delegate's result, or None when Multus records none."""
    try:
        current = results.to_current(dict(result), "")
    except CniError:
        return None  # Multus: "error converting result", and no Event
    if not _has_addresses(result, current):
        return None
    ips = " ".join(str(ip.get("address", "")) for ip in current.get("ips") or ())
    text = f"Add {ifname} [{ips}]"
    return f"{text} from {delegate_name}" if delegate_name else text


def no_network_found_message(namespace: str, name: str, *, cached: bool) -> str:
    """getKubernetesDelegate's text for a NAD that is not there (live GET or informer lister)."""
    resource = _CACHED_RESOURCE if cached else _LIVE_RESOURCE
    return (
        f"cannot find a network-attachment-definition ({name}) in namespace ({namespace}): "
        f'{resource} "{name}" not found'
    )


def _timestamp(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def event(involved: Mapping[str, Any], event_type: str, reason: str, message: str, now: float) -> Json:
    """The core/v1 Event client-go's recorder creates (source and reporting component `multus`)."""
    namespace = str(involved.get("namespace") or "default")
    stamp = _timestamp(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{involved.get('name', '')}.{int(now * 1e9):x}", "namespace": namespace},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message,
        "source": {"component": COMPONENT},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "type": event_type,
        "reportingComponent": COMPONENT,
        "reportingInstance": "",
    }


MESSAGE_SEPARATOR = "; "


def combine(events: Sequence[Mapping[str, Any]]) -> list[Json]:
    """One Event per (type, reason, involved object), in first-seen order; the messages of the ones
    folded in follow the first's, each in its own Multus wording, joined by MESSAGE_SEPARATOR."""
    merged: dict[tuple[str, str, str], Json] = {}
    for obj in events:
        involved = obj.get("involvedObject") or {}
        key = (str(obj.get("type")), str(obj.get("reason")), str(involved.get("uid") or involved.get("name")))
        first = merged.get(key)
        if first is None:
            merged[key] = dict(obj)
        else:
            first["message"] = f"{first['message']}{MESSAGE_SEPARATOR}{obj.get('message', '')}"
    return list(merged.values())


def summary(obj: Mapping[str, Any]) -> str:
    """`<type> <reason> <message>`, as client-go's fake recorder (and Multus's tests) print an Event."""
    return f"{obj.get('type', '')} {obj.get('reason', '')} {obj.get('message', '')}"
