"""STATUS: is the first delegate (the cluster network) ready for ADDs? Multus asks only that one."""

from __future__ import annotations

from cni_shim.core import versions
from cni_shim.core.network import Network
from cni_shim.errors import INTERNAL, CniError, delegate_error
from cni_shim.handler.candidates import base_candidates
from cni_shim.handler.context import Context, bare_runtime_conf, kube, prober, wait_readiness
from cni_shim.runner import Runner, negotiate, probe_versions


def status(ctx: Context) -> None:
    wait_readiness(ctx)
    api = kube(ctx) if ctx.conf.cluster_network else None
    first = base_candidates(ctx, api, None)[0]
    net = first.network
    version = status_version(ctx, net)
    if version is None:
        return
    try:
        Runner(ctx.svc.executor, ctx.store).status(net, version, bare_runtime_conf(ctx))
    except CniError as exc:
        # A delegate's own error comes back as it printed it (code 50/51 survive); others are wrapped.
        passed = delegate_error(exc)
        if passed is not exc:
            raise passed from exc
        context = (
            "error in STATUS command: "
            if net.conflist
            else "error in getting result from StatusNetworkList: "
        )
        raise exc.wrap(context, INTERNAL) from exc


def status_version(ctx: Context, net: Network) -> str | None:
    """STATUS/GC exist from 1.1.0; a delegate that cannot speak it is skipped, never sent it."""
    if not any(v and versions.at_least(v, "1.1.0") for v in net.candidate_versions):
        return None
    supported = {
        str(p["type"]): probe_versions(prober(ctx), str(p["type"]), ctx.search_path, ctx.svc.delegate_env)
        for p in net.plugins
    }
    try:
        version = negotiate(net, ctx.conf.cni_version, supported)
    except CniError:
        return None
    return version if versions.at_least(version, "1.1.0") else None
