"""No VF without an allocation, before any delegate runs (cni_shim.core.deviceaccess decides).

Only the networks the Pod chose are checked (its networks and default-network annotations): the
cluster network, defaultNetworks and the config's own delegates are the administrator's. ADD
refuses the first delegate that would receive a VF this Pod was not given; a DEL that has no
delegate cache to replay runs only the delegates that pass, so a refused ADD is never followed
by a teardown of someone else's VF or shadow. The node is asked only when a chosen network
names a device at all, so an ordinary ADD costs a walk over its configs and nothing more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cni_shim.core import cniargs, delegates, deviceaccess
from cni_shim.core.delegates import Candidate
from cni_shim.errors import CniError
from cni_shim.handler.context import Context

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.ports import NodeDevices


class _Gate:
    """One request's view: the Pod, the opt-out, and the node's devices once a network names one."""

    def __init__(self, ctx: Context, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        self.ctx = ctx
        self.pod_uid = str(meta.get("uid", ctx.pod_args.uid))
        self.opted_out = (
            str(meta.get("namespace", ctx.pod_args.namespace)) in ctx.conf.static_device_namespaces
        )
        self.cni_args = cniargs.for_delegate(ctx.pod_args, ctx.req.args)
        self.devices: NodeDevices | None = None

    def refusal(self, cand: Candidate) -> CniError | None:
        """Why `cand` may not receive what it names, None when it may."""
        ctx = self.ctx
        if cand.selection is None or self.opted_out or ctx.svc.devices_for is None:
            return None
        caps = delegates.capability_args(cand, ctx.conf.runtime_config, ctx.req.container_id, "")
        refs = deviceaccess.references(cand.network, caps, self.cni_args)
        if not refs:
            return None
        if self.devices is None:
            self.devices = ctx.svc.devices_for(ctx.conf)
        devices = self.devices
        vfs = deviceaccess.unbound(
            [(r, devices.virtual_function(r.kind, r.value)) for r in refs], cand.bound_pci
        )
        if not vfs:
            return None
        allocated = devices.allocated(self.pod_uid, cand.resource_name) if cand.resource_name else frozenset()
        if cand.device_id:  # the kubelet gave it to this Pod (cni_shim.handler.resourcelookup)
            allocated |= {cand.device_id}
        refused = deviceaccess.first_unallocated(vfs, allocated)
        if refused is None:
            return None
        ref, vf = refused
        return deviceaccess.refusal(ctx.cmd_err(), cand.name, ref, vf, ctx.pod_args.label())


def check(ctx: Context, candidates: Sequence[Candidate], pod: Mapping[str, Any]) -> None:
    """ADD: raise the first refusal, before the plan is saved and any delegate runs."""
    gate = _Gate(ctx, pod)
    for cand in candidates:
        refused = gate.refusal(cand)
        if refused is not None:
            raise refused


def runnable(ctx: Context, candidates: Sequence[Candidate], pod: Mapping[str, Any]) -> list[bool]:
    """A DEL without a cache: which candidates it may tear down; each one left out is logged."""
    gate = _Gate(ctx, pod)
    out = []
    for cand in candidates:
        why = cand.foreign
        if not why:
            refused = gate.refusal(cand)
            why = f"{refused.reason}: {refused.message}" if refused is not None else ""
        if why:
            ctx.log.warning(
                f"{ctx.prefix()}not deleting network {cand.name}, its ADD could not have run it: {why}"
            )
        out.append(not why)
    return out
