"""GC: delete every saved plan whose attachment the runtime no longer lists, then let each
surviving network's plugins collect their own garbage."""

from __future__ import annotations

from cni_shim.core import delegateplan
from cni_shim.core.network import Network
from cni_shim.errors import CniError
from cni_shim.handler.context import Context, bare_runtime_conf
from cni_shim.handler.replay import combined, delete_plan, load_plan, settle
from cni_shim.handler.status import status_version
from cni_shim.runner import Runner


def gc(ctx: Context) -> None:
    failures: list[CniError] = []
    surviving = _delete_stale(ctx, failures)
    runner = Runner(ctx.svc.executor, ctx.store)
    by_network: dict[bytes, tuple[Network, list[tuple[str, str]]]] = {}
    for cached in surviving:
        for d in cached.delegates:
            net = d.network()
            by_network.setdefault(d.conf, (net, []))[1].append((cached.container_id, d.ifname))
    if ctx.conf.delegates and not ctx.conf.cluster_network:
        first = ctx.conf.delegates[0]
        by_network.setdefault(first.raw, (first, []))
    for net, attachments in by_network.values():
        version = status_version(ctx, net)
        if version is not None:
            failures.extend(runner.gc(net, version, bare_runtime_conf(ctx), attachments))
    if failures:
        # libcni joins a GC's errors with newlines; Multus prefixes them.
        raise combined(failures, "error in GC command: ", "\n")


def _delete_stale(ctx: Context, failures: list[CniError]) -> list[delegateplan.Plan]:
    """DEL the plans of attachments not in cni.dev/valid-attachments; returns the others."""
    valid = set(ctx.conf.valid_attachments or ())
    surviving: list[delegateplan.Plan] = []
    for cid in ctx.store.plan_ids():
        try:
            cached = load_plan(ctx, cid)
        except CniError as exc:
            ctx.log.error(f"GC: {exc.message}; leaving it in place")
            continue
        if cached is None:
            continue
        if (cached.container_id, cached.ifname) in valid:
            surviving.append(cached)
            continue
        ctx.log.verbose(f"GC: deleting stale attachment {cached.container_id}/{cached.ifname}")
        errs = delete_plan(ctx, cached)
        failures.extend(exc for _, exc in errs)
        settle(ctx, cid, cached, errs, keep=bool(errs))
    return surviving
