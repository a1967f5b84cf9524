"""The resourceName path at ADD: which device each resourceName NAD's delegate gets.

The kubelet is asked once per ADD, at the first delegate whose NAD carries the
`k8s.v1.cni.cncf.io/resourceName` key (cni_shim.core.resourcenames hands the devices out), so
an ADD that selects no such NAD asks nothing and imports nothing for it. A failed read fails the
ADD with Multus's wording, before any delegate runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from cni_shim.core import delegates, resourcenames
from cni_shim.core.delegates import Candidate
from cni_shim.handler.context import Context, multus_context

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any


class DeviceLookup:
    """One ADD's view of the Pod's device-plugin allocations, read when first needed."""

    def __init__(self, ctx: Context, pod: Mapping[str, Any]) -> None:
        self._ctx = ctx
        meta = pod.get("metadata") or {}
        self._pod = (
            str(meta.get("namespace", ctx.pod_args.namespace)),
            str(meta.get("name", ctx.pod_args.name)),
            str(meta.get("uid", ctx.pod_args.uid)),
        )
        self._cursor: resourcenames.Cursor | None = None

    def _read(self) -> resourcenames.Cursor:
        build = self._ctx.svc.pod_resources_for
        if build is None:  # a mode without a kubelet: Multus's lookup would find nothing either
            return resourcenames.Cursor({})
        with multus_context("getKubernetesDelegate: failed to get a ResourceClient instance: "):
            allocations = build(self._ctx.conf).allocations(*self._pod)
        return resourcenames.Cursor(resourcenames.merge(allocations))

    def give(self, cand: Candidate) -> Candidate:
        """`cand` with its next device injected; as it is when its NAD names no resource or none is left."""
        if cand.resource_name is None:
            return cand
        if self._cursor is None:
            self._cursor = self._read()
        device = self._cursor.take(cand.resource_name)
        if not device:
            return cand
        return delegates.with_device_id(cand, device, f"delegate {cand.name}")


def device_info_source(cand: Candidate) -> str:
    """The device plugin's device-info file Multus copies for this delegate, "" when none: only a
    NAD with a resourceName whose delegate has a device (from the lookup or the selection)."""
    device = cand.device_id or (cand.selection.device_id if cand.selection is not None else "")
    if not cand.resource_name or not device or cand.master:
        return ""
    return resourcenames.device_info_source(cand.resource_name, device)
