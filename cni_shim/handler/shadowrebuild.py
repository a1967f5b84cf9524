"""DEL with neither delegate cache nor Pod: tear down what the Pod's managed shadows describe,
and the config's own delegates (the cluster network) with them.

Loaded only on that path, so no other DEL pays for its imports (cni_shim.core.shadowrebuild says
why the shadows suffice). Nothing here fails the DEL: the sandbox must go whatever happens, so
every failure is logged with reasons.SHADOW_TEARDOWN_INCOMPLETE and the failure's own reason.
"""

from __future__ import annotations

from cni_shim import reasons
from cni_shim.core import shadowrebuild
from cni_shim.errors import CniError
from cni_shim.handler.candidates import base_candidates
from cni_shim.handler.context import Context
from cni_shim.handler.devicegate import runnable
from cni_shim.handler.plan import plan
from cni_shim.handler.replay import delete_plan

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.core.delegates import Candidate
    from cni_shim.ports import KubeApi


def delete_from_shadows(ctx: Context, api: KubeApi) -> bool:
    """Tear down the Pod's shadows; False when there was none to use (nothing was run)."""
    args = ctx.pod_args
    if not (args.known and args.uid):
        return False  # without the runtime's Pod UID no shadow can be told to be this Pod's
    try:
        nads = api.list_nads(args.namespace, shadowrebuild.selector(args.uid))
    except CniError as exc:
        _incomplete(ctx, "cannot list the Pod's managed shadows", exc)
        return False
    found = shadowrebuild.sort(nads, args.namespace, args.name, args.uid)
    for name, why in found.refused:
        ctx.log.warning(f"{ctx.prefix()}not deleting managed shadow {name}: {why.reason}: {why.message}")
    if not found.usable:
        return False
    names = ", ".join(s.name for s in found.usable)
    ctx.log.warning(
        f"{ctx.prefix()}no delegate cache and no Pod: tearing down managed shadows {names} "
        "from the config the driver froze in them, and the cluster network"
    )
    try:
        candidates = [
            *_config_delegates(ctx, api),
            *(shadowrebuild.candidate(s, ctx.conf.conf_dir, ctx.svc.conf_files) for s in found.usable),
        ]
        rebuilt = plan(ctx, candidates, probe=False)
        # The device gate as for any DEL without a cache; the Pod is known by its CNI_ARGS only.
        stand_in = {"metadata": {"namespace": args.namespace, "name": args.name, "uid": args.uid}}
        keep = runnable(ctx, candidates, stand_in)
    except CniError as exc:
        _incomplete(ctx, f"cannot rebuild the delegates of {names}", exc)
        return True
    rebuilt = rebuilt._replace(
        delegates=tuple(d for d, ok in zip(rebuilt.delegates, keep, strict=True) if ok)
    )
    for d, failure in delete_plan(ctx, rebuilt):
        _incomplete(ctx, f"DEL of {d.name} failed", failure)
    return True


def _config_delegates(ctx: Context, api: KubeApi) -> list[Candidate]:
    """The config's own delegates (the cluster network), which ADD ran first for this Pod too: a
    Pod with shadows was ours. Its defaultNetworks and ordinary NADs went with the Pod."""
    try:
        return base_candidates(ctx, api, None)
    except CniError as exc:
        _incomplete(ctx, "cannot resolve the cluster network, tearing down the shadows only", exc)
        return []


def _incomplete(ctx: Context, what: str, exc: CniError) -> None:
    ctx.log.error(
        f"{ctx.prefix()}{reasons.SHADOW_TEARDOWN_INCOMPLETE}: {what}; the DEL succeeds anyway: "
        f"{exc.reason}: {exc.message}"
    )
