"""DEL: tear down what the saved plan says was set up, last delegate first; without a plan,
Multus's fallback rebuilds the delegates from the live Pod, less any its ADD would have refused,
and without the Pod either, the Pod's managed shadows still give the VFs' delegates."""

from __future__ import annotations

from cni_shim import reasons
from cni_shim.errors import ApiError, CniError
from cni_shim.handler.context import Context, kube
from cni_shim.handler.replay import combined, delete_plan, load_plan, settle

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.ports import KubeApi


def delete(ctx: Context) -> None:
    cid = ctx.req.container_id
    try:
        cached = load_plan(ctx, cid)
    except CniError as exc:
        # Multus returns success here so the sandbox can go; keep the file for an operator to inspect.
        ctx.log.error(f"{ctx.prefix()}{exc.message}; cannot properly delete, leaving it in place")
        return
    if cached is None:
        _delete_without_cache(ctx)
        return
    failures = delete_plan(ctx, cached)
    # Only the delegates that failed need the retry; the others are already gone.
    keep = (
        ctx.conf.retry_delete_on_error
        and bool(failures)
        and not any("no such file or directory" in exc.message for _, exc in failures)
    )
    settle(ctx, cid, cached, failures, keep)
    if failures:
        raise combined([exc for _, exc in failures])


def _delete_without_cache(ctx: Context) -> None:
    """Multus's fallback: rebuild from the live Pod if it exists; otherwise (our addition) from the
    Pod's managed shadows if any are left; otherwise succeed with a warning.

    Unlike Multus, a rebuilt delegate runs only if this Pod's ADD could have run it (issue #31):
    a managed shadow bound to another Pod, or a delegate naming a VF this Pod was not given, is
    left out and logged, so the DEL after a refused ADD never tears down someone else's VF."""
    api = kube(ctx)
    pod = None
    if api is not None and ctx.pod_args.known:
        try:
            pod = api.get_pod(ctx.pod_args.namespace, ctx.pod_args.name)
        except ApiError as exc:
            ctx.log.warning(f"{ctx.prefix()}{exc.message}")
    if pod is not None and ctx.pod_args.uid and (pod.get("metadata") or {}).get("uid") != ctx.pod_args.uid:
        pod = None
    if api is not None and pod is None and _delete_from_shadows(ctx, api):
        return
    if api is None or pod is None:
        ctx.log.warning(
            f"{ctx.prefix()}failed to get the cached delegates file {ctx.conf.cni_dir}/{ctx.req.container_id}, "
            "cannot properly delete"
        )
        return
    # Building delegates is off the cached DEL path: only this fallback loads it.
    from cni_shim.handler.candidates import base_candidates, pod_candidates  # noqa: PLC0415
    from cni_shim.handler.devicegate import runnable  # noqa: PLC0415
    from cni_shim.handler.plan import plan  # noqa: PLC0415

    ctx.log.warning(f"{ctx.prefix()}no delegate cache; rebuilding delegates from the current Pod and NADs")
    candidates = pod_candidates(ctx, api, pod, base_candidates(ctx, api, pod), guarded=False)
    rebuilt = plan(ctx, candidates, probe=False)  # interface names from the whole list, as ADD's
    # Nothing runs that ADD would have refused: another Pod's shadow, a VF this Pod was not given.
    keep = runnable(ctx, candidates, pod)
    rebuilt = rebuilt._replace(
        delegates=tuple(d for d, ok in zip(rebuilt.delegates, keep, strict=True) if ok)
    )
    failures = delete_plan(ctx, rebuilt)
    if failures:
        raise combined([exc for _, exc in failures])


def _delete_from_shadows(ctx: Context, api: KubeApi) -> bool:
    """Beyond Multus, which deletes nothing here: the Pod's managed shadows outlive it until the
    driver unprepares, after this DEL (cni_shim.core.shadowrebuild). Never fails the DEL."""
    from cni_shim.handler.shadowrebuild import delete_from_shadows  # noqa: PLC0415 - this path only

    try:
        return delete_from_shadows(ctx, api)
    except Exception as exc:  # a bug here must not keep the sandbox
        ctx.log.error(
            f"{ctx.prefix()}{reasons.SHADOW_TEARDOWN_INCOMPLETE}: the DEL succeeds anyway: "
            f"{reasons.INTERNAL_ERROR}: {type(exc).__name__}: {exc}"
        )
        return True
