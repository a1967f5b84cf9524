"""The shim's ADD/DEL/CHECK/STATUS/GC core: one request in, a result or a CniError out.

Thin mode (cni_shim.main) and thick mode share this; each supplies the adapters in Services.
All Kubernetes reads here are live; DEL, CHECK and GC work from the delegate cache and make no
Pod or NAD read unless the cache is missing (Multus's fallback).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from cni_shim import reasons
from cni_shim.core import cniargs, delegateplan, netconf, netstatus, protocol, results, versions
from cni_shim.core import events as pod_events
from cni_shim.core.netconf import NetConf
from cni_shim.core.network import Network
from cni_shim.core.network import parse as parse_network
from cni_shim.errors import (
    INTERNAL,
    INVALID_NETWORK_CONFIG,
    IO_FAILURE,
    TRY_AGAIN_LATER,
    UNKNOWN_CONTAINER,
    CniError,
    KubeApiError,
    config_error,
    delegate_error,
)
from cni_shim.runner import Attachment, Runner, cache_key, negotiate, probe_versions
from sriov_contract import keys
from sriov_contract import reasons as contract_reasons
from sriov_contract.errors import ReasonedError
from sriov_lib import quickjson
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.core.delegates import Candidate
    from cni_shim.ports import CacheStore, Clock, EventSink, Executor, KubeApi, Log, Routes
    from sriov_contract.networks import NetworkSelection
    from sriov_contract.registry import Registry

    Json = dict[str, Any]


POD_RETRY_BUDGET = 2.5
POD_RETRY_INTERVAL = 0.25
READINESS_TIMEOUT = 45.0
STATUS_WRITE_ATTEMPTS = 5
STATUS_RETRY_INTERVAL = 0.01
MAX_FILE_NAME = 255
_RETRYABLE_STATUS = (0, 500, 503)


def stat_netns(path: str) -> str | None:
    """Why CNI_NETNS cannot be the Pod's netns (Go's ns.GetNS wording), None when it exists: one stat."""
    try:
        os.stat(path)
    except OSError as exc:
        return f'failed to Statfs "{path}": {(exc.strerror or str(exc)).lower()}'
    return None


class Services(TypedTuple):
    """The adapters a mode plugs in; factories take the decoded config because it names dirs and kubeconfig."""

    executor: Executor
    store_for: Callable[[str], CacheStore]
    kube_for: Callable[[NetConf], KubeApi | None]
    log_for: Callable[[NetConf], Log]
    clock: Clock
    delegate_env: Mapping[str, str]
    routes: Routes
    # Checks the ADD's CNI_NETNS before the first delegate runs (Multus's validateIfName).
    netns_problem: Callable[[str], str | None] = stat_netns
    # Pod Events (AddedInterface, NoNetworkFound); None writes none whatever the config says.
    events: EventSink | None = None
    # What asks delegates for their VERSION, given cniDir (thin mode keeps the answers there);
    # None: `executor` itself (the daemon's remembers them in memory).
    versions_for: Callable[[str], Executor] | None = None


class _Ctx(TypedTuple):
    req: protocol.Request
    conf: NetConf
    version: str
    pod_args: cniargs.PodArgs
    svc: Services
    store: CacheStore
    log: Log
    events: list[Json]  # this ADD's Pod Events, published at its end (a fresh list per request)

    @property
    def search_path(self) -> tuple[str, ...]:
        return tuple(p for p in [self.conf.bin_dir, *self.req.path.split(":")] if p)

    def prefix(self) -> str:
        return f"[{self.pod_args.label()}]: " if self.pod_args.known else ""

    def cmd_err(self) -> str:
        """Multus's cmdErr prefix: `Multus: [ns/name/uid]: ` for a verb about a Pod, `Multus: ` otherwise."""
        if self.req.command in ("ADD", "DEL", "CHECK"):
            return f"Multus: [{self.pod_args.label()}]: "
        return "Multus: "


def handle(req: protocol.Request, svc: Services) -> Json | None:
    """Run one already environment-checked request; returns the ADD result in the caller's version.

    A failure's msg is Multus's wording; its stable reason goes into the error's details and,
    here, into the log line (the config names the log, so a config that fails to load logs nothing).
    """
    try:
        return _handle(req, svc)
    except CniError as exc:
        try:
            log = svc.log_for(netconf.load(netconf.fold(netconf.decode_object(req.stdin))))
        except CniError:
            raise exc from None
        log.error(f"{req.command} failed: {exc.reason} (code {exc.code}): {exc.message}")
        raise


def _handle(req: protocol.Request, svc: Services) -> Json | None:
    raw = netconf.fold(netconf.decode_object(req.stdin))
    version = protocol.check_config(req.command, raw)
    try:
        conf = netconf.load(raw)
    except CniError as exc:
        if req.command in ("DEL", "CHECK"):
            raise  # Multus's DEL and CHECK return the loader's error as it is
        raise exc.wrap("Multus: error loading netconf: ") from exc
    pod_args = cniargs.parse(req.args) if req.command in ("ADD", "DEL", "CHECK") else cniargs.PodArgs()
    ctx = _Ctx(req, conf, version, pod_args, svc, svc.store_for(conf.cni_dir), svc.log_for(conf), [])
    if req.command == "ADD":
        try:
            return _add(ctx)
        finally:
            _publish_events(ctx)  # a failed ADD's Events (a successful one has handed its own over)
            _settle_events(ctx)
    if req.command == "DEL":
        _delete(ctx)
    elif req.command == "CHECK":
        _check(ctx)
    elif req.command == "STATUS":
        _status(ctx)
    elif req.command == "GC":
        _gc(ctx)
    return None


# ---------------------------------------------------------------- reads


def _kube(ctx: _Ctx) -> KubeApi | None:
    try:
        return ctx.svc.kube_for(ctx.conf)
    except CniError as exc:
        raise exc.wrap("Multus: error getting k8s client: ") from exc


def _wait_readiness(ctx: _Ctx) -> None:
    path = ctx.conf.readiness_indicator_file
    if not path:
        return
    clock = ctx.svc.clock
    deadline = clock.monotonic() + READINESS_TIMEOUT
    while not os.path.exists(path):
        if clock.monotonic() >= deadline:
            raise CniError(
                reasons.DEFAULT_NETWORK_NOT_READY,
                f"{ctx.cmd_err()}have you checked that your default network is ready? still waiting for "
                f"readinessindicatorfile @ {path}. pollimmediate error: timed out waiting for the condition",
                TRY_AGAIN_LATER,
            )
        clock.sleep(1.0)


def _is_static_pod(pod: Mapping[str, Any]) -> bool:
    source = ((pod.get("metadata") or {}).get("annotations") or {}).get("kubernetes.io/config.source")
    return source is not None and source != "api"


def _get_pod(ctx: _Ctx, kube: KubeApi) -> Json | None:
    """Multus GetPod on ADD: within POD_RETRY_BUDGET retry transient failures and NotFound (a Pod
    the runtime names may not be visible yet); None means still NotFound when the budget ends.

    Only ADD reads through here: DEL never waits for a Pod. Every attempt after the first is a
    live GET, so the interval is Multus's live one (250 ms), not its informer's 50 ms.
    """
    clock = ctx.svc.clock
    deadline = clock.monotonic() + POD_RETRY_BUDGET
    while True:
        try:
            pod = kube.get_pod(ctx.pod_args.namespace, ctx.pod_args.name)
        except KubeApiError as exc:
            if exc.status not in _RETRYABLE_STATUS or clock.monotonic() + POD_RETRY_INTERVAL > deadline:
                raise exc.wrap(f"{ctx.cmd_err()}error waiting for pod: ") from exc
        else:
            if pod is not None or clock.monotonic() + POD_RETRY_INTERVAL > deadline:
                return pod
        clock.sleep(POD_RETRY_INTERVAL)


def _verify_uid(ctx: _Ctx, pod: Mapping[str, Any]) -> None:
    api_uid = (pod.get("metadata") or {}).get("uid", "")
    if ctx.pod_args.uid and api_uid != ctx.pod_args.uid and not _is_static_pod(pod):
        raise CniError(
            reasons.POD_UID_MISMATCH,
            f'{ctx.cmd_err()}expected pod UID "{ctx.pod_args.uid}" but got "{api_uid}" from Kube API',
            TRY_AGAIN_LATER,
        )


# ---------------------------------------------------------------- planning


def _base_candidates(ctx: _Ctx, kube: KubeApi | None, pod: Json | None) -> list[Candidate]:
    from cni_shim.core import delegates  # noqa: PLC0415 - building delegates: not on the cached DEL path

    conf = ctx.conf
    if conf.cluster_network:
        what = "clusterNetwork/defaultNetworks" if ctx.req.command in ("ADD", "DEL") else "clusterNetwork"
        if kube is None:
            # Multus resolves a clusterNetwork (even a file path) only with an API client.
            raise config_error(
                f"{ctx.cmd_err()}failed to get {what}: GetDefaultNetworks: must have either Kubernetes config or delegates"
            )
        get_nad = kube.get_nad
        try:
            cluster = delegates.resolve_network(
                conf.cluster_network, conf.multus_namespace, conf.conf_dir, get_nad
            )
        except CniError as exc:
            # Multus's text drops the cause; the log line keeps it.
            ctx.log.error(f"clusterNetwork {conf.cluster_network}: {exc.reason}: {exc.message}")
            raise CniError(
                exc.reason,
                f"{ctx.cmd_err()}failed to get {what}: GetDefaultNetworks: failed to get clusterNetwork "
                f"{conf.cluster_network} in namespace {conf.multus_namespace}",
                exc.code,
            ) from exc
        found = [cluster._replace(master=True)]
        pod_ns = ctx.pod_args.namespace
        if pod is not None and pod_ns not in conf.system_namespaces:
            found += [
                delegates.resolve_network(v, conf.multus_namespace, conf.conf_dir, get_nad)
                for v in conf.default_networks
            ]
        return found
    found = [
        delegates.load(raw, None, f"delegate {i} of the shim config") for i, raw in enumerate(conf.delegates)
    ]
    return [found[0]._replace(master=True), *found[1:]]


def _nads(kube: KubeApi, selections: Sequence[NetworkSelection]) -> Iterator[Json | None]:
    """The selected NADs in order, read together when the view can (the daemon's live reads)."""
    keys = [(sel.namespace, sel.name) for sel in selections]
    # ports.ManyNads by its shape: isinstance on a Protocol would import `typing` into every start.
    get_nads = getattr(kube, "get_nads", None)
    if get_nads is not None:
        return get_nads(keys)  # type: ignore[no-any-return]
    return (kube.get_nad(namespace, name) for namespace, name in keys)


def _nad_candidate(
    ctx: _Ctx, nad: Json | None, sel: NetworkSelection, pod: Json, registry: Registry | None, *, guarded: bool
) -> Candidate:
    if nad is None:
        kube = ctx.svc.kube_for(ctx.conf)
        cached = kube is not None and not kube.pod_reads_live
        message = pod_events.no_network_found_message(sel.namespace, sel.name, cached=cached)
        _record_event(ctx, pod, pod_events.WARNING, pod_events.NO_NETWORK_FOUND, message)
        raise CniError(
            reasons.NO_NETWORK_FOUND,
            f"getKubernetesDelegate: {message}",  # the informer view words NotFound as Multus thick's lister
            TRY_AGAIN_LATER,
        )
    annotations = (nad.get("metadata") or {}).get("annotations") or {}
    managed = guarded and keys.BINDING_ANNOTATION in annotations
    if managed:
        from cni_shim.core import guard  # noqa: PLC0415 - contract parsers only for Pods that use shadows

        guard.check_shadow(nad, sel, pod, registry)
    what = f"NetworkAttachmentDefinition {sel.namespace}/{sel.name}"
    from cni_shim.core import delegates  # noqa: PLC0415 - building delegates: not on the cached DEL path

    return delegates.load(delegates.nad_config(nad, ctx.conf.conf_dir), sel, what, managed=managed)


_GETTING_NETWORKS = "TryLoadPodDelegates: error in getting k8s network for pod: "


def _is_guard(exc: CniError) -> bool:
    """The managed-shadow guard's refusals: Multus has no such check, so they keep our own text."""
    return exc.reason.startswith("ManagedShadow")


class _multus_context:
    """Prefix a failure with the context Multus's error chain gives it (not the guard's own).

    A class rather than @contextmanager: `contextlib` (and the `functools` under it) would be
    imported by every thin invocation, DEL included."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, CniError) and not _is_guard(exc):
            raise exc.wrap(self.prefix) from exc


class _annotation_errors:
    """A bad networks/default-network annotation is the Pod's config error, named and never a crash."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, ReasonedError) and not isinstance(exc, CniError):
            # The contract's parser carries Multus's text for the same failure.
            raise CniError(
                exc.reason, str(exc.details.get("multus") or exc.message), INVALID_NETWORK_CONFIG
            ) from exc
        if isinstance(exc, RecursionError):
            raise CniError(
                contract_reasons.INVALID_NETWORKS_ANNOTATION,
                "parsePodNetworkAnnotation: failed to parse pod Network Attachment Selection Annotation JSON format: "
                "network annotation is nested too deeply",
                INVALID_NETWORK_CONFIG,
            ) from exc


def _pod_candidates(
    ctx: _Ctx, kube: KubeApi, pod: Json, base: list[Candidate], *, guarded: bool
) -> list[Candidate]:
    from cni_shim.core import delegates  # noqa: PLC0415 - building delegates: not on the cached DEL path
    from sriov_contract.networks import parse_network_selections  # noqa: PLC0415 - likewise

    meta = pod.get("metadata") or {}
    pod_ns = str(meta.get("namespace", ctx.pod_args.namespace))
    out = list(base)
    uses_registry = guarded and keys.REGISTRY_ANNOTATION in (meta.get("annotations") or {})
    if uses_registry:
        from cni_shim.core import guard  # noqa: PLC0415 - contract parsers only for Pods that use shadows

        registry = guard.pod_registry(pod)
    else:
        registry = None
    text = (meta.get("annotations") or {}).get(keys.NETWORKS_ANNOTATION)
    with _annotation_errors():
        default_sel = delegates.default_network_selection(pod, ctx.conf.multus_namespace)
        selections = parse_network_selections(text, pod_ns) if isinstance(text, str) else []
    if default_sel is not None:
        nad = kube.get_nad(default_sel.namespace, default_sel.name)
        with _multus_context(
            "TryLoadPodDelegates: error in loading K8s cluster default network from pod annotation: "
            "tryLoadK8sPodDefaultNetwork: failed getting the delegate: "
        ):
            cand = _nad_candidate(ctx, nad, default_sel, pod, registry, guarded=guarded)
        out = [cand._replace(master=True), *out[1:]] if out else [cand._replace(master=True)]
    if ctx.conf.namespace_isolation:
        with _multus_context(_GETTING_NETWORKS):
            delegates.check_isolation(selections, pod_ns, ctx.conf.global_namespaces)
    if registry is not None:
        from cni_shim.core import guard  # noqa: PLC0415

        guard.check_registry(registry, selections, ctx.pod_args.label())
    seen_managed: set[tuple[str, str]] = set()
    for sel, nad in zip(selections, _nads(kube, selections), strict=True):
        with _multus_context(_GETTING_NETWORKS + "GetNetworkDelegates: failed getting the delegate: "):
            cand = _nad_candidate(ctx, nad, sel, pod, registry, guarded=guarded)
        if cand.managed:
            key = (sel.namespace, sel.name)
            if key in seen_managed:
                raise CniError(
                    reasons.MANAGED_SHADOW_DUPLICATE_SELECTION,
                    f"managed shadow {sel.namespace}/{sel.name} is selected more than once; remove the duplicate",
                    INVALID_NETWORK_CONFIG,
                )
            seen_managed.add(key)
        out.append(cand)
    delegates.check_default_routes(out)
    return out


def _prober(ctx: _Ctx) -> Executor:
    versions_for = ctx.svc.versions_for
    return versions_for(ctx.conf.cni_dir) if versions_for is not None else ctx.svc.executor


def _plan(ctx: _Ctx, candidates: Sequence[Candidate], *, probe: bool) -> delegateplan.Plan:
    from cni_shim.core import delegates  # noqa: PLC0415 - building delegates: not on the cached DEL path

    names = delegates.ifnames(candidates, ctx.req.ifname)
    networks = [parse_network(c.conf, f"delegate {c.name}") for c in candidates]
    supported: dict[str, Sequence[str]] = {}
    if probe:
        for net in networks:
            for plugin in net.plugins:
                ptype = str(plugin["type"])
                if ptype not in supported:
                    supported[ptype] = probe_versions(
                        _prober(ctx), ptype, ctx.search_path, ctx.svc.delegate_env
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
            conf=cand.conf,
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
        )
        for cand, ifname, net in zip(candidates, names, networks, strict=True)
    )
    return delegateplan.Plan(
        container_id=ctx.req.container_id,
        netns=ctx.req.netns,
        ifname=ctx.req.ifname,
        pod_namespace=ctx.pod_args.namespace,
        pod_name=ctx.pod_args.name,
        pod_uid=ctx.pod_args.uid,
        delegates=planned,
    )


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


def _attachment(
    ctx: _Ctx, p: delegateplan.Plan, d: delegateplan.PlannedDelegate, *, adding: bool
) -> Attachment:
    return Attachment(
        container_id=p.container_id,
        # The runtime's CNI_NETNS is authoritative (empty on DEL means it is gone); only GC,
        # which has no attachment parameters, uses the netns recorded at ADD as libcni does.
        netns=p.netns if ctx.req.command == "GC" else ctx.req.netns,
        ifname=d.ifname,
        cni_args=d.cni_args + (d.add_args if adding else ()),
        capability_args=d.capability_args,
        search_path=ctx.search_path,
        base_env=ctx.svc.delegate_env,
    )


# ---------------------------------------------------------------- ADD


def _add(ctx: _Ctx) -> Json:
    kube = _kube(ctx)
    _wait_readiness(ctx)
    pod: Json | None = None
    if kube is not None and ctx.pod_args.known:
        pod = _get_pod(ctx, kube)
        if pod is None:
            ctx.log.warning(
                f"{ctx.prefix()}pod not found; returning an empty result without running delegates"
            )
            return results.convert(results.placeholder(ctx.req.ifname, ctx.req.netns), ctx.version)
        _verify_uid(ctx, pod)
    candidates = _base_candidates(ctx, kube, pod)
    if kube is not None and pod is not None:
        with _multus_context(f"{ctx.cmd_err()}error loading k8s delegates k8s args: "):
            candidates = _pod_candidates(ctx, kube, pod, candidates, guarded=True)
    the_plan = _plan(ctx, candidates, probe=True)
    with _multus_context(
        f"{ctx.cmd_err()}error saving the delegates: saveDelegates: error in saving the delegates : "
    ):
        ctx.store.save_plan(ctx.req.container_id, the_plan.to_bytes())
    runner = Runner(ctx.svc.executor, ctx.store)
    master_result: Json | None = None
    entries: list[Json] = []
    for idx, d in enumerate(the_plan.delegates):
        net = parse_network(d.conf, f"delegate {d.name}")
        try:
            if idx == 0:
                _check_netns(ctx, net, d.ifname)
            result = runner.add(net, d.cni_version, _attachment(ctx, the_plan, d, adding=True))
        except CniError as exc:
            _rollback(ctx, the_plan, idx)
            # Multus wraps the delegate's error with %v: its text survives, its code becomes 999.
            raise exc.wrap(
                f'[{ctx.pod_args.label()}:{net.name}]: error adding container to network "{net.name}": ',
                INTERNAL,
            ) from exc
        if d.route_override and (result.get("interfaces") or result.get("ips")):
            att = _attachment(ctx, the_plan, d, adding=True)
            with _multus_context(ctx.cmd_err()):  # no rollback: Multus leaves the delegates added
                ctx.svc.routes.replace_defaults(att.netns, d.ifname, d.default_route)
            runner.rewrite_default_routes(net, d.cni_version, att, d.default_route)
        ctx.log.verbose(
            f"Add: {ctx.pod_args.label()}:{d.name}({net.name}):{d.ifname} {quickjson.dumps(result)}"
        )
        if pod is not None:
            message = pod_events.added_interface_message(d.ifname, result, d.name)
            if message is not None:
                _record_event(ctx, pod, pod_events.NORMAL, pod_events.ADDED_INTERFACE, message)
        if master_result is None or d.master:
            master_result = result
        entries.extend(netstatus.statuses(result, d.name, d.master))
    assert master_result is not None  # a plan always has a master delegate
    # Handed over before the status write: thin mode writes them beside it, not after it.
    _publish_events(ctx)
    if kube is not None and pod is not None:
        _write_network_status(ctx, kube, entries, pod)
    return results.convert(master_result, ctx.version)


def _record_event(ctx: _Ctx, pod: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
    if ctx.conf.pod_events and ctx.svc.events is not None:
        ref = pod_events.pod_reference(pod)
        ctx.events.append(pod_events.event(ref, event_type, reason, message, time.time()))


def _publish_events(ctx: _Ctx) -> None:
    """Hand this ADD's Events to the sink; a failure costs only a log line, never the ADD."""
    if not ctx.events or ctx.svc.events is None:
        return
    events, ctx.events[:] = list(ctx.events), []
    try:
        ctx.svc.events.publish(pod_events.combine(events))
    except Exception as exc:
        _event_failure(ctx, exc)


def _settle_events(ctx: _Ctx) -> None:
    if ctx.svc.events is None:
        return
    try:
        ctx.svc.events.settle()
    except Exception as exc:
        _event_failure(ctx, exc)


def _event_failure(ctx: _Ctx, exc: Exception) -> None:
    ctx.log.warning(f"{ctx.prefix()}could not record the Pod Events: {exc}")


def _check_netns(ctx: _Ctx, net: Network, ifname: str) -> None:
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


def _rollback(ctx: _Ctx, p: delegateplan.Plan, failed: int) -> None:
    """Undo delegates failed..0 in reverse (the failing one included); their errors are only logged.

    The cache then keeps only what is still attached, so the runtime's DEL after a failed ADD
    does not repeat a teardown that non-idempotent plugins (host-device) would refuse.
    """
    attempted = p._replace(delegates=p.delegates[: failed + 1])
    failures = _delete_plan(ctx, attempted)
    for d, exc in failures:
        ctx.log.error(f"{ctx.prefix()}rollback of delegate {d.name} failed: {exc}")
    # The delegate whose ADD failed may refuse a DEL of what it never made; only retain the
    # ones that were attached and could not be detached.
    attached = [(d, exc) for d, exc in failures if d is not p.delegates[failed]]
    ctx.store.save_plan(p.container_id, _remaining(p, attached).to_bytes())


def _remaining(
    p: delegateplan.Plan, failures: Sequence[tuple[delegateplan.PlannedDelegate, CniError]]
) -> delegateplan.Plan:
    failed = {id(d) for d, _ in failures}
    return p._replace(delegates=tuple(d for d in p.delegates if id(d) in failed))


def _write_network_status(ctx: _Ctx, kube: KubeApi, entries: list[Json], read: Json) -> None:
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
        reuse = attempt == 0 and kube.pod_reads_live
        pod = read if reuse else kube.get_pod(args.namespace, args.name)
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
            kube.replace_pod_status({**pod, "metadata": {**meta, "annotations": annotations}})
            return
        except KubeApiError as exc:
            if exc.status != 409 or attempt == STATUS_WRITE_ATTEMPTS - 1:
                raise exc.wrap(f"{ctx.cmd_err()}error setting the networks status: ") from exc
            ctx.svc.clock.sleep(STATUS_RETRY_INTERVAL)


# ---------------------------------------------------------------- DEL / CHECK / GC / STATUS


def _load_plan(ctx: _Ctx, container_id: str) -> delegateplan.Plan | None:
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
    identity = delegateplan.Plan(
        container_id=ctx.req.container_id,
        netns=ctx.req.netns,
        ifname=ctx.req.ifname,
        pod_namespace=ctx.pod_args.namespace,
        pod_name=ctx.pod_args.name,
        pod_uid=ctx.pod_args.uid,
        delegates=(),
    )
    return delegateplan.from_multus(
        data,
        where,
        identity=identity,
        cni_args=cniargs.for_delegate(ctx.pod_args, ctx.req.args),
        cni_version=ctx.conf.cni_version,
        runtime_config=ctx.conf.runtime_config,
    )


def _delete_plan(ctx: _Ctx, p: delegateplan.Plan) -> list[tuple[delegateplan.PlannedDelegate, CniError]]:
    """DEL every delegate, last first, carrying on past failures (Multus delPlugins)."""
    runner = Runner(ctx.svc.executor, ctx.store)
    failures = []
    for d in reversed(p.delegates):
        net = parse_network(d.conf, f"delegate {d.name}")
        try:
            runner.delete(net, d.cni_version, _attachment(ctx, p, d, adding=False))
        except CniError as exc:
            failures.append((d, exc.wrap(_verb_context("Del", net))))
    return failures


def _verb_context(verb: str, net: Network) -> str:
    """Multus's DelegateDel/DelegateCheck wrapping of a delegate's error."""
    if net.conflist:
        return (
            f'Delegate{verb}: error invoking Conflist{verb} - "{net.name}": conflist{verb}: '
            f"error in getting result from {verb}NetworkList: "
        )
    return f'Delegate{verb}: error invoking Delegate{verb} - "{net.first_type}": error in getting result from {verb}Network: '


def _combined(failures: Sequence[CniError], prefix: str = "errors: ", sep: str = " / ") -> CniError:
    """Multus's delPlugins answer, untyped (999): one failure as it is (what the real Multus
    v4.2.3 prints), several joined behind `errors: `."""
    if len(failures) == 1 and prefix == "errors: ":
        return CniError(failures[0].reason, failures[0].message, INTERNAL)
    return CniError(failures[0].reason, prefix + sep.join(f.message for f in failures), INTERNAL)


def _delete(ctx: _Ctx) -> None:
    cid = ctx.req.container_id
    try:
        cached = _load_plan(ctx, cid)
    except CniError as exc:
        # Multus returns success here so the sandbox can go; keep the file for an operator to inspect.
        ctx.log.error(f"{ctx.prefix()}{exc.message}; cannot properly delete, leaving it in place")
        return
    if cached is None:
        _delete_without_cache(ctx)
        return
    failures = _delete_plan(ctx, cached)
    keep = (
        ctx.conf.retry_delete_on_error
        and failures
        and not any("no such file or directory" in exc.message for _, exc in failures)
    )
    if keep:
        # Only the delegates that failed need the retry; the others are already gone.
        ctx.store.save_plan(cid, _remaining(cached, failures).to_bytes())
    else:
        ctx.store.remove_plan(cid)
    if failures:
        raise _combined([exc for _, exc in failures])


def _delete_without_cache(ctx: _Ctx) -> None:
    """Multus's fallback: rebuild from the live Pod if it exists, otherwise succeed with a warning."""
    kube = _kube(ctx)
    pod = None
    if kube is not None and ctx.pod_args.known:
        try:
            pod = kube.get_pod(ctx.pod_args.namespace, ctx.pod_args.name)
        except KubeApiError as exc:
            ctx.log.warning(f"{ctx.prefix()}{exc.message}")
    if pod is not None and ctx.pod_args.uid and (pod.get("metadata") or {}).get("uid") != ctx.pod_args.uid:
        pod = None
    if kube is None or pod is None:
        ctx.log.warning(
            f"{ctx.prefix()}failed to get the cached delegates file {ctx.conf.cni_dir}/{ctx.req.container_id}, "
            "cannot properly delete"
        )
        return
    ctx.log.warning(f"{ctx.prefix()}no delegate cache; rebuilding delegates from the current Pod and NADs")
    candidates = _pod_candidates(ctx, kube, pod, _base_candidates(ctx, kube, pod), guarded=False)
    failures = _delete_plan(ctx, _plan(ctx, candidates, probe=False))
    if failures:
        raise _combined([exc for _, exc in failures])


def _check(ctx: _Ctx) -> None:
    cached = _load_plan(ctx, ctx.req.container_id)
    if cached is None:
        raise CniError(
            reasons.UNKNOWN_CONTAINER,
            f"no delegate cache for container {ctx.req.container_id} under {ctx.conf.cni_dir}; it was never added",
            UNKNOWN_CONTAINER,
        )
    if ctx.conf.cluster_network:
        return  # Multus CHECKs only the config's own delegates, which a clusterNetwork replaces
    # Only those, as Multus's CmdCheck does: not the Pod's networks the cached ADD also ran.
    static = _plan(ctx, _base_candidates(ctx, None, None), probe=False)
    runner = Runner(ctx.svc.executor, ctx.store)
    for d in static.delegates:
        net = parse_network(d.conf, f"delegate {d.name}")
        try:
            runner.check(net, d.cni_version, _attachment(ctx, static, d, adding=False))
        except CniError as exc:
            raise exc.wrap(_verb_context("Check", net), INTERNAL) from exc


def _first_delegate(ctx: _Ctx) -> Candidate:
    kube = _kube(ctx) if ctx.conf.cluster_network else None
    return _base_candidates(ctx, kube, None)[0]


def _bare_attachment(ctx: _Ctx) -> Attachment:
    return Attachment("", "", "", (), {}, ctx.search_path, ctx.svc.delegate_env)


def _status(ctx: _Ctx) -> None:
    _wait_readiness(ctx)
    first = _first_delegate(ctx)
    net = parse_network(first.conf, f"delegate {first.name}")
    version = _status_version(ctx, net)
    if version is None:
        return
    try:
        Runner(ctx.svc.executor, ctx.store).status(net, version, _bare_attachment(ctx))
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


def _status_version(ctx: _Ctx, net: Network) -> str | None:
    """STATUS/GC exist from 1.1.0; a delegate that cannot speak it is skipped, never sent it."""
    if not any(v and versions.at_least(v, "1.1.0") for v in net.candidate_versions):
        return None
    supported = {
        str(p["type"]): probe_versions(_prober(ctx), str(p["type"]), ctx.search_path, ctx.svc.delegate_env)
        for p in net.plugins
    }
    try:
        version = negotiate(net, ctx.conf.cni_version, supported)
    except CniError:
        return None
    return version if versions.at_least(version, "1.1.0") else None


def _gc(ctx: _Ctx) -> None:
    valid = set(ctx.conf.valid_attachments or ())
    failures: list[CniError] = []
    surviving: list[delegateplan.Plan] = []
    for cid in ctx.store.plan_ids():
        try:
            cached = _load_plan(ctx, cid)
        except CniError as exc:
            ctx.log.error(f"GC: {exc.message}; leaving it in place")
            continue
        if cached is None:
            continue
        if (cached.container_id, cached.ifname) in valid:
            surviving.append(cached)
            continue
        ctx.log.verbose(f"GC: deleting stale attachment {cached.container_id}/{cached.ifname}")
        errs = _delete_plan(ctx, cached)
        if errs:
            failures.extend(exc for _, exc in errs)
            ctx.store.save_plan(cid, _remaining(cached, errs).to_bytes())
        else:
            ctx.store.remove_plan(cid)
    runner = Runner(ctx.svc.executor, ctx.store)
    by_network: dict[bytes, tuple[Network, list[tuple[str, str]]]] = {}
    for cached in surviving:
        for d in cached.delegates:
            net = parse_network(d.conf, f"delegate {d.name}")
            by_network.setdefault(d.conf, (net, []))[1].append((cached.container_id, d.ifname))
    if ctx.conf.delegates and not ctx.conf.cluster_network:
        net = parse_network(ctx.conf.delegates[0], "delegate 0 of the shim config")
        by_network.setdefault(ctx.conf.delegates[0], (net, []))
    for net, attachments in by_network.values():
        version = _status_version(ctx, net)
        if version is not None:
            failures.extend(runner.gc(net, version, _bare_attachment(ctx), attachments))
    if failures:
        # libcni joins a GC's errors with newlines; Multus prefixes them.
        raise _combined(failures, "error in GC command: ", "\n")


def _cni_version(stdin: bytes) -> str:
    try:
        value = quickjson.loads(stdin).get("cniVersion", "")
    except (ValueError, AttributeError, RecursionError):
        return ""
    return value if isinstance(value, str) else ""


def invoke(
    env: dict[str, str], read_stdin: Callable[[], bytes], services: Callable[[dict[str, str]], Services]
) -> tuple[int, str, str]:
    """One request from the runtime's environment and stdin; returns (exit status, stdout, stderr).

    Never raises: the runtime must get CNI error JSON, never a traceback. Thin mode calls this
    from the executable, thick mode from the daemon's /cni handler, so both answer byte for byte
    alike. `services` builds the adapters once the environment is valid.
    """
    req = protocol.Request.from_env(env, b"")
    stdin = b""
    try:
        protocol.check_environment(req)
        try:
            stdin = read_stdin()
        except OSError as exc:
            raise CniError(reasons.STDIN_UNREADABLE, f"error reading from stdin: {exc}", IO_FAILURE) from exc
        req = protocol.Request.from_env(env, stdin)
        result = handle(req, services(env))
    except CniError as err:
        return 1, protocol.render_error(err, _cni_version(stdin)), ""
    except Exception as exc:
        internal = CniError(
            reasons.INTERNAL_ERROR, f"cni-shim failed unexpectedly: {type(exc).__name__}: {exc}"
        )
        return 1, protocol.render_error(internal, _cni_version(stdin)), ""
    return 0, protocol.render_result(result) if result is not None else "", ""
