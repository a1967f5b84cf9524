"""ResourceSlices for this node's advertised VFs: one node-local pool owned by the Node.

The pure part builds the desired slices (at most 128 devices each, devices in name order) and
refuses devices that break the API limits instead of trimming them: a silently dropped user
attribute would change what CEL selectors match. The publisher makes the API match the desired
set, bumping the pool generation whenever anything changes, and is re-run whenever a slice is
deleted behind our back (kubelet wipes a node's slices when it restarts).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sriov_dra.advertise.inventory import AdvertisedDevice
from sriov_dra.model import DRIVER_NAME
from sriov_dra.ports import SliceApi

log = logging.getLogger(__name__)

MAX_DEVICES_PER_SLICE = 128
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
    publishable = []
    for device in devices:
        problem = _device_problem(device)
        if problem is None:
            publishable.append({"name": device.vf.name, "attributes": dict(device.attributes)})
        else:
            rejected[device.vf.name] = problem
    chunks = [
        publishable[i : i + MAX_DEVICES_PER_SLICE] for i in range(0, len(publishable), MAX_DEVICES_PER_SLICE)
    ] or [[]]
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


def _content(s: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    spec = s.get("spec") or {}
    pool = spec.get("pool") or {}
    return spec.get("devices") or [], pool.get("resourceSliceCount"), spec.get("nodeName")


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
        changed = bool(stale) or any(
            name not in existing or _content(existing[name]) != _content(body)
            for name, body in wanted.items()
        )
        if not changed:
            return desired
        generation = current_gen + 1
        for name, body in wanted.items():
            body["spec"]["pool"]["generation"] = generation
            if name in existing:
                body["metadata"]["resourceVersion"] = existing[name]["metadata"].get("resourceVersion")
                self._api.replace(name, body)
            else:
                self._api.create(body)
        for name in stale:
            self._api.delete(name)
        return desired
