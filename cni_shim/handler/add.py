"""ADD: read the Pod, plan its delegates, save the plan, run them in order (rolling back on a
failure), then write the Pod's network-status and hand over its Events."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cni_shim import reasons
from cni_shim.core import delegateplan, delegatewaves, netstatus, podevents, results
from cni_shim.core.network import Network
from cni_shim.errors import INTERNAL, TRY_AGAIN_LATER, ApiError, CniError
from cni_shim.handler import devicegate, devinfo
from cni_shim.handler.candidates import base_candidates, pod_candidates
from cni_shim.handler.context import Context, kube, multus_context, runtime_conf, wait_readiness
from cni_shim.handler.plan import plan
from cni_shim.handler.resourcelookup import DeviceLookup
from cni_shim.runner import Runner
from sriov_contract import keys
from sriov_lib import quickjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.ports import KubeApi

    Json = dict[str, Any]


POD_RETRY_BUDGET = 2.5
POD_RETRY_INTERVAL = 0.25
STATUS_WRITE_ATTEMPTS = 5
STATUS_RETRY_INTERVAL = 0.01
_RETRYABLE_STATUS = (0, 500, 503)


def add(ctx: Context) -> Json:
    """The master delegate's result in the caller's version."""
    api = kube(ctx)
    wait_readiness(ctx)
    pod: Json | None = None
    if api is not None and ctx.pod_args.known:
        pod = _get_pod(ctx, api)
        if pod is None:
            ctx.log.warning(
                f"{ctx.prefix()}pod not found; returning an empty result without running delegates"
            )
            return results.convert(results.placeholder(ctx.req.ifname, ctx.req.netns), ctx.version)
        _verify_uid(ctx, pod)
    lookup = DeviceLookup(ctx, pod) if pod is not None and ctx.pod_args.known else None
    candidates = base_candidates(ctx, api, pod, lookup)
    if api is not None and pod is not None:
        with multus_context(f"{ctx.cmd_err()}error loading k8s delegates k8s args: "):
            candidates = pod_candidates(ctx, api, pod, candidates, guarded=True, lookup=lookup)
        devicegate.check(ctx, candidates, pod)
    the_plan = plan(ctx, candidates, probe=True)
    with multus_context(
        f"{ctx.cmd_err()}error saving the delegates: saveDelegates: error in saving the delegates : "
    ):
        ctx.store.save_plan(ctx.req.container_id, the_plan.to_bytes())
    devinfo.write_files(ctx, the_plan.delegates)
    master_result, entries = _run_delegates(ctx, the_plan, pod)
    # Handed over before the status write: thin mode writes them beside it, not after it.
    ctx.publish_events()
    if api is not None and pod is not None:
        _write_network_status(ctx, api, entries, pod)
    return results.convert(master_result, ctx.version)


def _run_delegates(ctx: Context, the_plan: delegateplan.Plan, pod: Json | None) -> tuple[Json, list[Json]]:
    """ADD every delegate, a wave at a time (cni_shim.core.delegatewaves); returns the master's
    result and the network-status entries.

    Whatever ran at once, the answers are read in plan order: the first failure in that order is
    the ADD's error and what follows it in its wave is rolled back with it, so the error, the
    Events, network-status and the cache are what the serial order gives.
    """
    runner = Runner(ctx.svc.executor, ctx.store)
    master_result: Json | None = None
    entries: list[Json] = []
    plan_waves = delegatewaves.waves(
        the_plan.delegates,
        limit=ctx.conf.max_parallel_delegates,
        ordinary=ctx.conf.parallel_ordinary_delegates,
    )
    for wave in plan_waves:
        if wave[0] == 0:
            _check_netns_or_roll_back(ctx, the_plan)
        answers = _add_wave(ctx, runner, the_plan, wave)
        for pos, idx in enumerate(wave):
            d, answer = the_plan.delegates[idx], answers[pos]
            net = d.network()
            if isinstance(answer, CniError):
                failed = {
                    i for i, a in zip(wave[pos:], answers[pos:], strict=True) if isinstance(a, CniError)
                }
                _rollback(ctx, the_plan, wave[-1], failed)
                # Multus wraps the delegate's error with %v: its text survives, its code becomes 999.
                raise answer.wrap(
                    f'[{ctx.pod_args.label()}:{net.name}]: error adding container to network "{net.name}": ',
                    INTERNAL,
                ) from answer
            if isinstance(answer, BaseException):
                raise answer
            result = answer
            if d.route_override and (result.get("interfaces") or result.get("ips")):
                rt = runtime_conf(ctx, the_plan, d, adding=True)
                with multus_context(ctx.cmd_err()):  # no rollback: Multus leaves the delegates added
                    ctx.svc.routes.replace_defaults(rt.netns, d.ifname, d.default_route)
                runner.rewrite_default_routes(net, d.cni_version, rt, d.default_route)
            ctx.log.verbose(
                f"Add: {ctx.pod_args.label()}:{d.name}({net.name}):{d.ifname} {quickjson.dumps(result)}"
            )
            if pod is not None:
                message = podevents.added_interface_message(d.ifname, result, d.name)
                if message is not None:
                    ctx.record_event(pod, podevents.NORMAL, podevents.ADDED_INTERFACE, message)
            if master_result is None or d.master:
                master_result = result
            entries.extend(
                netstatus.statuses(result, d.name, d.master, d.device_info or devinfo.read(ctx, d))
            )
    assert master_result is not None  # a plan always has a master delegate
    return master_result, entries


def _add_wave(
    ctx: Context, runner: Runner, the_plan: delegateplan.Plan, wave: delegatewaves.Wave
) -> list[Json | BaseException]:
    def task(d: delegateplan.PlannedDelegate) -> Callable[[], Json]:
        return lambda: runner.add(d.network(), d.cni_version, runtime_conf(ctx, the_plan, d, adding=True))

    return ctx.svc.fanout([task(the_plan.delegates[idx]) for idx in wave], ctx.conf.max_parallel_delegates)


def _check_netns_or_roll_back(ctx: Context, the_plan: delegateplan.Plan) -> None:
    """The netns check counts as the first delegate's ADD failing (Multus's DelegateAdd order)."""
    d = the_plan.delegates[0]
    net = d.network()
    try:
        _check_netns(ctx, net, d.ifname)
    except CniError as exc:
        _rollback(ctx, the_plan, 0, {0})
        raise exc.wrap(
            f'[{ctx.pod_args.label()}:{net.name}]: error adding container to network "{net.name}": ',
            INTERNAL,
        ) from exc


def _is_static_pod(pod: Mapping[str, Any]) -> bool:
    source = ((pod.get("metadata") or {}).get("annotations") or {}).get("kubernetes.io/config.source")
    return source is not None and source != "api"


def _get_pod(ctx: Context, api: KubeApi) -> Json | None:
    """Multus GetPod on ADD: within POD_RETRY_BUDGET retry transient failures and NotFound (a Pod
    the runtime names may not be visible yet); None means still NotFound when the budget ends.

    Only ADD reads through here: DEL never waits for a Pod. Every attempt after the first is a
    live GET, so the interval is Multus's live one (250 ms), not its informer's 50 ms.
    """
    clock = ctx.svc.clock
    deadline = clock.monotonic() + POD_RETRY_BUDGET
    while True:
        try:
            pod = api.get_pod(ctx.pod_args.namespace, ctx.pod_args.name)
        except ApiError as exc:
            if exc.status not in _RETRYABLE_STATUS or clock.monotonic() + POD_RETRY_INTERVAL > deadline:
                raise exc.wrap(f"{ctx.cmd_err()}error waiting for pod: ") from exc
        else:
            if pod is not None or clock.monotonic() + POD_RETRY_INTERVAL > deadline:
                return pod
        clock.sleep(POD_RETRY_INTERVAL)


def _verify_uid(ctx: Context, pod: Mapping[str, Any]) -> None:
    api_uid = (pod.get("metadata") or {}).get("uid", "")
    if ctx.pod_args.uid and api_uid != ctx.pod_args.uid and not _is_static_pod(pod):
        raise CniError(
            reasons.POD_UID_MISMATCH,
            f'{ctx.cmd_err()}expected pod UID "{ctx.pod_args.uid}" but got "{api_uid}" from Kube API',
            TRY_AGAIN_LATER,
        )


def _check_netns(ctx: Context, net: Network, ifname: str) -> None:
    """Multus refuses a netns that does not exist in DelegateAdd, before the delegate runs (and then
    rolls that delegate back like any failed one); the netns is the same for every delegate, so
    it is checked once."""
    problem = ctx.svc.netns_problem(ctx.req.netns)
    if problem is None:
        return
    conf_type = "" if net.conflist else net.first_type
    raise CniError(
        reasons.NETNS_NOT_FOUND,
        f'DelegateAdd: cannot set "{conf_type}" interface name to "{ifname}": validateIfName: '
        f"no net namespace {ctx.req.netns} found: {problem}",
        INTERNAL,
    )


def _rollback(ctx: Context, p: delegateplan.Plan, last: int, failed: set[int]) -> None:
    """Undo delegates last..0 in reverse (those whose ADD failed included); their errors are only
    logged. `failed` are the indexes whose ADD failed: one in the serial order, possibly more in a
    wave that ran at once.

    The cache then keeps only what is still attached, so the runtime's DEL after a failed ADD
    does not repeat a teardown that non-idempotent plugins (host-device) would refuse.
    """
    from cni_shim.handler.replay import delete_plan, remaining  # noqa: PLC0415 - a successful ADD never tears down

    attempted = p._replace(delegates=p.delegates[: last + 1])
    failures = delete_plan(ctx, attempted)
    for d, exc in failures:
        ctx.log.error(f"{ctx.prefix()}rollback of delegate {d.name} failed: {exc}")
    # A delegate whose ADD failed may refuse a DEL of what it never made; only retain the
    # ones that were attached and could not be detached.
    never_made = {id(p.delegates[i]) for i in failed}
    attached = [(d, exc) for d, exc in failures if id(d) not in never_made]
    ctx.store.save_plan(p.container_id, remaining(p, attached).to_bytes())


def _write_network_status(ctx: Context, api: KubeApi, entries: list[Json], read: Json) -> None:
    """Read-modify-write of the annotation, guarded by resourceVersion.

    When this ADD read the Pod live, the first attempt writes over that answer: usually nothing
    changed since, and the resourceVersion precondition turns a stale copy into a 409, after which
    every attempt re-reads. That saves a Pod GET per ADD without weakening the guard.
    """
    if not entries:
        return
    value = netstatus.render(entries)
    args = ctx.pod_args
    for attempt in range(STATUS_WRITE_ATTEMPTS):
        reuse = attempt == 0 and api.pod_reads_live
        pod = read if reuse else api.get_pod(args.namespace, args.name)
        if pod is None:
            ctx.log.warning(f"{ctx.prefix()}pod vanished before network-status could be written")
            return
        meta = pod.get("metadata") or {}
        if args.uid and meta.get("uid") != args.uid and not _is_static_pod(pod):
            raise CniError(
                reasons.POD_UID_MISMATCH,
                f'SetNetworkStatus: expected pod {args.namespace}/{args.name} UID "{args.uid}" but got "{meta.get("uid")}" from Kube API',
                TRY_AGAIN_LATER,
            )
        # Only the annotations change: copy that path and share the rest (a whole-Pod deepcopy
        # was a millisecond of every ADD).
        annotations = {**(meta.get("annotations") or {}), keys.NETWORK_STATUS_ANNOTATION: value}
        try:
            api.replace_pod_status({**pod, "metadata": {**meta, "annotations": annotations}})
            return
        except ApiError as exc:
            if exc.status != 409 or attempt == STATUS_WRITE_ATTEMPTS - 1:
                raise exc.wrap(f"{ctx.cmd_err()}error setting the networks status: ") from exc
            ctx.svc.clock.sleep(STATUS_RETRY_INTERVAL)
