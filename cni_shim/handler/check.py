"""CHECK: the config's own delegates, checked against what ADD cached, as Multus's CmdCheck does."""

from __future__ import annotations

from cni_shim import reasons
from cni_shim.errors import INTERNAL, UNKNOWN_CONTAINER, CniError
from cni_shim.handler.candidates import base_candidates
from cni_shim.handler.context import Context, runtime_conf
from cni_shim.handler.plan import plan
from cni_shim.handler.replay import load_plan, verb_context
from cni_shim.runner import Runner


def check(ctx: Context) -> None:
    cached = load_plan(ctx, ctx.req.container_id)
    if cached is None:
        raise CniError(
            reasons.UNKNOWN_CONTAINER,
            f"no delegate cache for container {ctx.req.container_id} under {ctx.conf.cni_dir}; it was never added",
            UNKNOWN_CONTAINER,
        )
    if ctx.conf.cluster_network:
        return  # Multus CHECKs only the config's own delegates, which a clusterNetwork replaces
    # Only those, as Multus's CmdCheck does: not the Pod's networks the cached ADD also ran.
    static = plan(ctx, base_candidates(ctx, None, None), probe=False)
    runner = Runner(ctx.svc.executor, ctx.store)
    for d in static.delegates:
        net = d.network()
        try:
            runner.check(net, d.cni_version, runtime_conf(ctx, static, d, adding=False))
        except CniError as exc:
            raise exc.wrap(verb_context("Check", net), INTERNAL) from exc
