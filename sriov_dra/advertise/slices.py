"""ResourceSlices for this node's advertised VFs: one node-local pool owned by the Node.

The pure part builds the desired slices (at most 128 devices each, 64 in a slice holding a tainted
device as the API requires, devices in name order) and refuses devices that break the API limits
instead of trimming them: a silently dropped user attribute would change what CEL selectors match.
An Unhealthy device carries the NoSchedule taint of sriov_dra.core.devicehealth. The publisher
makes the API match the desired set, bumping the pool generation whenever the devices change; a
change of taints only rewrites the slices it touches and keeps the generation (KEP-5055: taints
need no new generation). It is re-run whenever a slice is deleted behind our back (kubelet wipes a
node's slices when it restarts).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sriov_dra.advertise.inventory import AdvertisedDevice
from sriov_dra.core.devicehealth import taints
from sriov_dra.model import DRIVER_NAME
from sriov_dra.ports import SliceApi

log = logging.getLogger(__name__)

MAX_DEVICES_PER_SLICE = 128
# ResourceSliceMaxDevicesWithAdvancedFeatures: the cap once any device of a slice has taints.
MAX_DEVICES_WITH_TAINTS = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_STRING_VALUE = 64


@dataclass(frozen=True)
class DesiredSlices:
    slices: list[dict[str, Any]]
    # device name -> why it is not published
    rejected: dict[str, str] = field(default_factory=dict)


_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _valid_qualified_name(key: str) -> bool:
    domain, _, name = key.rpartition("/")
    return bool(_C_IDENTIFIER.match(name)) and (
        (not domain and "/" not in key) or bool(_DNS_SUBDOMAIN.match(domain))
    )


def _device_problem(device: AdvertisedDevice) -> str | None:
    # One invalid device would make the API server refuse the whole slice, hiding every VF.
    bad = sorted(k for k in device.attributes if not _valid_qualified_name(k))
    if bad:
        return (
            f"InvalidAttributeName: device {device.vf.name} has attribute name(s) {bad} that are not "
            "'<DNS subdomain>/<C identifier of at most 32 characters>'; fix the DeviceAttributes keys"
        )
    count = len(device.attributes)
    if count > MAX_ATTRIBUTES_AND_CAPACITIES:
        return (
            f"TooManyDeviceAttributes: device {device.vf.name} would carry {count} attributes and capacities, "
            f"over the limit of {MAX_ATTRIBUTES_AND_CAPACITIES}; remove DeviceAttributes keys for it"
        )
    for key, value in device.attributes.items():
        for member in value.values():
            if isinstance(member, str) and len(member) > MAX_STRING_VALUE:
                return (
                    f"DeviceAttributeTooLong: attribute {key} of device {device.vf.name} is {len(member)} "
                    f"characters, over the limit of {MAX_STRING_VALUE}; shorten it"
                )
    return None


def slice_name(node_name: str, index: int) -> str:
    return f"{node_name}-{DRIVER_NAME}-{index:05x}"


def desired_slices(
    node_name: str, node_uid: str, devices: Sequence[AdvertisedDevice], generation: int
) -> DesiredSlices:
    """The slices that should exist; an empty device list still yields one (empty) slice so the
    pool visibly has no devices rather than being unknown."""
    rejected: dict[str, str] = {}
    publishable: list[dict[str, Any]] = []
    for device in devices:
        problem = _device_problem(device)
        if problem is not None:
            rejected[device.vf.name] = problem
            continue
        entry: dict[str, Any] = {"name": device.vf.name, "attributes": dict(device.attributes)}
        device_taints = taints(device.health)
        if device_taints:
            entry["taints"] = device_taints
        publishable.append(entry)
    chunks = _chunks(publishable)
    slices = []
    for index, chunk in enumerate(chunks):
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {
                    "name": slice_name(node_name, index),
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Node",
                            "name": node_name,
                            "uid": node_uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "driver": DRIVER_NAME,
                    "nodeName": node_name,
                    "pool": {"name": node_name, "generation": generation, "resourceSliceCount": len(chunks)},
                    "devices": chunk,
                },
            }
        )
    return DesiredSlices(slices, rejected)


def _chunks(devices: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    chunks: list[list[dict[str, Any]]] = [[]]
    for device in devices:
        current = chunks[-1]
        tainted = bool(device.get("taints")) or any(d.get("taints") for d in current)
        if len(current) >= (MAX_DEVICES_WITH_TAINTS if tainted else MAX_DEVICES_PER_SLICE):
            chunks.append([device])
        else:
            current.append(device)
    return chunks


def _untimed(devices: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    # The API server stamps timeAdded on every taint; it is not ours to compare.
    out = []
    for device in devices:
        plain = dict(device)
        if "taints" in plain:
            plain["taints"] = [{k: v for k, v in t.items() if k != "timeAdded"} for t in plain["taints"]]
        out.append(plain)
    return out


def _content(s: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    spec = s.get("spec") or {}
    pool = spec.get("pool") or {}
    return _untimed(spec.get("devices") or []), pool.get("resourceSliceCount"), spec.get("nodeName")


def _layout(s: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """A slice's content without the taints: what a change of taints alone leaves as it was."""
    devices, count, node = _content(s)
    return [{k: v for k, v in d.items() if k != "taints"} for d in devices], count, node


def _keep_time_added(body: dict[str, Any], existing: Mapping[str, Any]) -> None:
    """A taint that stays keeps the time the API server gave it (tolerationSeconds count from it)."""
    stamped = {
        (d["name"], t.get("key"), t.get("value"), t.get("effect")): t["timeAdded"]
        for d in (existing.get("spec") or {}).get("devices") or []
        for t in d.get("taints") or []
        if t.get("timeAdded")
    }
    for device in body["spec"]["devices"]:
        for taint in device.get("taints") or []:
            when = stamped.get((device["name"], taint["key"], taint.get("value"), taint["effect"]))
            if when:
                taint["timeAdded"] = when


class SlicePublisher:
    """Makes the node's ResourceSlices match the advertised devices."""

    def __init__(self, api: SliceApi, node_name: str, node_uid: str) -> None:
        self._api = api
        self._node = node_name
        self._node_uid = node_uid

    def publish(self, devices: Sequence[AdvertisedDevice]) -> DesiredSlices:
        existing = {s["metadata"]["name"]: s for s in self._api.list()}
        current_gen = max((int(s["spec"]["pool"].get("generation", 0)) for s in existing.values()), default=0)
        desired = desired_slices(self._node, self._node_uid, devices, current_gen)
        for name, why in desired.rejected.items():
            log.error("not publishing device %s: %s", name, why)
        wanted = {s["metadata"]["name"]: s for s in desired.slices}
        stale = set(existing) - set(wanted)
        differing = [
            name
            for name, body in wanted.items()
            if name not in existing or _content(existing[name]) != _content(body)
        ]
        if not stale and not differing:
            return desired
        taints_only = (
            not stale
            and all(name in existing and _layout(existing[name]) == _layout(wanted[name]) for name in wanted)
            and all(int(s["spec"]["pool"].get("generation", 0)) == current_gen for s in existing.values())
        )
        generation = current_gen if taints_only else current_gen + 1
        for name in differing if taints_only else list(wanted):
            body = wanted[name]
            body["spec"]["pool"]["generation"] = generation
            if name in existing:
                _keep_time_added(body, existing[name])
                body["metadata"]["resourceVersion"] = existing[name]["metadata"].get("resourceVersion")
                self._api.replace(name, body)
            else:
                self._api.create(body)
        for name in stale:
            self._api.delete(name)
        return desired
