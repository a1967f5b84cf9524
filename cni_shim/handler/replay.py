"""The saved plan, read back and torn down: what DEL, GC and a failed ADD's rollback share.

No Pod or NAD is read here, so teardown works after every API object is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cni_shim.core import cniargs, delegateplan, delegatewaves
from cni_shim.core.network import Network
from cni_shim.errors import INTERNAL, CniError
from cni_shim.handler.context import Context, request_plan, runtime_conf
from cni_shim.runner import Runner


def load_plan(ctx: Context, container_id: str) -> delegateplan.Plan | None:
    """The plan saved at ADD (or a Multus delegate cache, adopted); None when there is none."""
    data = ctx.store.load_plan(container_id)
    if data is None:
        return None
    where = f"{ctx.conf.cni_dir}/{container_id}"
    if data.lstrip()[:1] != b"[":
        return delegateplan.from_bytes(data, where)
    if not ctx.req.ifname:
        # A Multus cache has no interface names; only a DEL/CHECK (which has CNI_IFNAME) can use it.
        ctx.log.warning(f"{where} is a Multus delegate cache; leaving it to the container's DEL")
        return None
    return delegateplan.from_multus(
        data,
        where,
        identity=request_plan(ctx),
        cni_args=cniargs.for_delegate(ctx.pod_args, ctx.req.args),
        cni_version=ctx.conf.cni_version,
        runtime_config=ctx.conf.runtime_config,
    )


def delete_plan(ctx: Context, p: delegateplan.Plan) -> list[tuple[delegateplan.PlannedDelegate, CniError]]:
    """DEL every delegate, last first, carrying on past failures (Multus delPlugins). The waves ADD
    ran at once are deleted at once too; the failures come back in the serial order."""
    runner = Runner(ctx.svc.executor, ctx.store)
    failures = []
    limit = ctx.conf.max_parallel_delegates
    for wave in delegatewaves.teardown_waves(
        p.delegates, limit=limit, ordinary=ctx.conf.parallel_ordinary_delegates
    ):
        members = [p.delegates[idx] for idx in wave]
        answers = ctx.svc.fanout([_deletion(ctx, runner, p, d) for d in members], limit)
        for d, answer in zip(members, answers, strict=True):
            if isinstance(answer, CniError):
                failures.append((d, answer.wrap(verb_context("Del", d.network()))))
            elif isinstance(answer, BaseException):
                raise answer
    return failures


def _deletion(
    ctx: Context, runner: Runner, p: delegateplan.Plan, d: delegateplan.PlannedDelegate
) -> Callable[[], None]:
    def run() -> None:
        try:
            runner.delete(d.network(), d.cni_version, runtime_conf(ctx, p, d, adding=False))
        finally:
            _remove_device_info(ctx, d)

    return run


def _remove_device_info(ctx: Context, d: delegateplan.PlannedDelegate) -> None:
    """Multus removes an attachment's CNIDeviceInfoFile on DEL, whatever the delegate answered."""
    files, path = ctx.svc.device_info_files, d.capability_args.get("CNIDeviceInfoFile")
    if files is None or not isinstance(path, str):
        return
    try:
        files.remove(path)
    except OSError as exc:
        ctx.log.debug(f"device-info file {path} not removed: {exc}")


def remaining(
    p: delegateplan.Plan, failures: Sequence[tuple[delegateplan.PlannedDelegate, CniError]]
) -> delegateplan.Plan:
    """The plan cut down to the delegates that failed (what a retry must still tear down)."""
    failed = {id(d) for d, _ in failures}
    return p._replace(delegates=tuple(d for d in p.delegates if id(d) in failed))


def settle(
    ctx: Context,
    container_id: str,
    p: delegateplan.Plan,
    failures: Sequence[tuple[delegateplan.PlannedDelegate, CniError]],
    keep: bool,
) -> None:
    """After a teardown: save only the failed delegates for a retry (`keep`), or forget the plan."""
    if keep:
        ctx.store.save_plan(container_id, remaining(p, failures).to_bytes())
    else:
        ctx.store.remove_plan(container_id)


def verb_context(verb: str, net: Network) -> str:
    """Multus's DelegateDel/DelegateCheck wrapping of a delegate's error."""
    if net.conflist:
        return (
            f'Delegate{verb}: error invoking Conflist{verb} - "{net.name}": conflist{verb}: '
            f"error in getting result from {verb}NetworkList: "
        )
    return f'Delegate{verb}: error invoking Delegate{verb} - "{net.first_type}": error in getting result from {verb}Network: '


def combined(failures: Sequence[CniError], prefix: str = "errors: ", sep: str = " / ") -> CniError:
    """Multus's delPlugins answer, untyped (999): one failure as it is (what the real Multus
    v4.2.3 prints), several joined behind `errors: `."""
    if len(failures) == 1 and prefix == "errors: ":
        return CniError(failures[0].reason, failures[0].message, INTERNAL)
    return CniError(failures[0].reason, prefix + sep.join(f.message for f in failures), INTERNAL)
