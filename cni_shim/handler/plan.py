"""Candidates -> the delegate plan: interface names, each delegate's negotiated version, its
capability and CNI args, all fixed before anything runs (ADD saves it; DEL, CHECK and GC replay it)."""

from __future__ import annotations

from collections.abc import Sequence

from cni_shim import reasons
from cni_shim.core import cniargs, delegateplan, delegates, protocol, versions
from cni_shim.core.network import Network
from cni_shim.errors import INVALID_NETWORK_CONFIG, CniError
from cni_shim.handler.context import Context, prober, request_plan
from cni_shim.handler.resourcelookup import device_info_source
from cni_shim.runner import cache_key, negotiate, probe_versions

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.core.delegates import Candidate

MAX_FILE_NAME = 255


def plan(ctx: Context, candidates: Sequence[Candidate], *, probe: bool) -> delegateplan.Plan:
    """`probe`: ask each plugin binary which versions it speaks (ADD); otherwise assume all of ours."""
    names = delegates.ifnames(candidates, ctx.req.ifname)
    networks = [c.network for c in candidates]
    supported: dict[str, Sequence[str]] = {}
    if probe:
        for net in networks:
            for plugin in net.plugins:
                ptype = str(plugin["type"])
                if ptype not in supported:
                    supported[ptype] = probe_versions(
                        prober(ctx), ptype, ctx.search_path, ctx.svc.delegate_env
                    )
    else:
        supported = {str(p["type"]): versions.SUPPORTED for n in networks for p in n.plugins}
    for cand, ifname, net in zip(candidates, names, networks, strict=True):
        _check_cache_key(net, ctx.req.container_id, ifname, cand.name)
    base_args = cniargs.for_delegate(ctx.pod_args, ctx.req.args)
    override = delegates.route_override(candidates)
    planned = tuple(
        delegateplan.PlannedDelegate(
            name=cand.name,
            conf=net.raw,
            ifname=ifname,
            cni_version=negotiate(net, ctx.conf.cni_version, supported),
            master=cand.master,
            managed=cand.managed,
            capability_args=delegates.capability_args(
                cand, ctx.conf.runtime_config, ctx.req.container_id, ifname
            ),
            cni_args=base_args,
            add_args=delegates.add_args(cand),
            route_override=override,
            default_route=cand.selection.default_route if cand.selection is not None else (),
            device_info=cand.device_info or {},
            parsed=net,
            device_info_source=device_info_source(cand),
        )
        for cand, ifname, net in zip(candidates, names, networks, strict=True)
    )
    return request_plan(ctx, planned)


def _check_cache_key(net: Network, container_id: str, ifname: str, what: str) -> None:
    """libcni's network-name rule, plus a length that still fits the per-attachment result file."""
    if not protocol.valid_id(net.name):
        raise CniError(
            reasons.INVALID_NETWORK_NAME,
            f"delegate {what:.200}: network name {net.name!r:.100} must match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$",
            INVALID_NETWORK_CONFIG,
        )
    if len(cache_key(net.name, container_id, ifname).encode()) > MAX_FILE_NAME:
        raise CniError(
            reasons.INVALID_NETWORK_NAME,
            f"delegate {what:.200}: network name of {len(net.name)} characters is too long for the result cache",
            INVALID_NETWORK_CONFIG,
        )
