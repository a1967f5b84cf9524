"""The delegates a request runs, before interface naming: the config's own (cluster network and
default networks, or `delegates`), then the Pod's selected NADs, each managed shadow guarded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from cni_shim import reasons
from cni_shim.core import delegates, podevents
from cni_shim.errors import INVALID_NETWORK_CONFIG, TRY_AGAIN_LATER, CniError, config_error
from cni_shim.handler.context import Context, multus_context
from sriov_contract import keys
from sriov_contract import reasons as contract_reasons
from sriov_contract.errors import ReasonedError
from sriov_contract.networks import parse_network_selections

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.core.delegates import Candidate
    from cni_shim.handler.resourcelookup import DeviceLookup
    from cni_shim.ports import KubeApi
    from sriov_contract.networks import NetworkSelection
    from sriov_contract.registry import Registry

    Json = dict[str, Any]


_GETTING_NETWORKS = "TryLoadPodDelegates: error in getting k8s network for pod: "


def base_candidates(
    ctx: Context, kube: KubeApi | None, pod: Json | None, lookup: DeviceLookup | None = None
) -> list[Candidate]:
    """The config's own delegates, the first one master: clusterNetwork (+ defaultNetworks for a
    Pod outside the system namespaces) or the `delegates` list; `lookup` gives the NADs among them
    that carry a resourceName their devices (ADD)."""
    conf = ctx.conf
    if conf.cluster_network:
        what = "clusterNetwork/defaultNetworks" if ctx.req.command in ("ADD", "DEL") else "clusterNetwork"
        if kube is None:
            # Multus resolves a clusterNetwork (even a file path) only with an API client.
            raise config_error(
                f"{ctx.cmd_err()}failed to get {what}: GetDefaultNetworks: must have either Kubernetes config or delegates"
            )
        get_nad, files = kube.get_nad, ctx.svc.conf_files
        try:
            cluster = delegates.resolve_network(
                conf.cluster_network, conf.multus_namespace, conf.conf_dir, get_nad, files
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
                delegates.resolve_network(v, conf.multus_namespace, conf.conf_dir, get_nad, files)
                for v in conf.default_networks
            ]
        if lookup is not None:
            with multus_context(f"{ctx.cmd_err()}failed to get {what}: GetDefaultNetworks: "):
                found = [lookup.give(c) for c in found]
        return found
    found = [
        delegates.candidate(net, None, f"delegate {i} of the shim config")
        for i, net in enumerate(conf.delegates)
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
    ctx: Context,
    nad: Json | None,
    sel: NetworkSelection,
    pod: Json,
    registry: Registry | None,
    *,
    guarded: bool,
    lookup: DeviceLookup | None = None,
) -> Candidate:
    if nad is None:
        kube = ctx.svc.kube_for(ctx.conf)
        cached = kube is not None and not kube.pod_reads_live
        message = podevents.no_network_found_message(sel.namespace, sel.name, cached=cached)
        ctx.record_event(pod, podevents.WARNING, podevents.NO_NETWORK_FOUND, message)
        raise CniError(
            reasons.NO_NETWORK_FOUND,
            f"getKubernetesDelegate: {message}",  # the informer view words NotFound as Multus thick's lister
            TRY_AGAIN_LATER,
        )
    annotations = (nad.get("metadata") or {}).get("annotations") or {}
    shadow = keys.BINDING_ANNOTATION in annotations
    managed = guarded and shadow
    bound_pci = foreign = ""
    info = None
    if shadow:
        from cni_shim.core import guard  # noqa: PLC0415 - contract parsers only for Pods that use shadows

        if guarded:
            bound_pci = guard.check_shadow(nad, sel, pod, registry)
            info = guard.device_info(nad, bound_pci)
        else:
            # A DEL rebuilding what it has no cache for: a shadow that is not this Pod's is never run.
            try:
                bound_pci = guard.check_bound(nad, pod)
            except CniError as exc:
                foreign = f"{exc.reason}: {exc.message}"
            else:
                # Only to name the CNIDeviceInfoFile this DEL removes; a bad one removes none.
                try:
                    info = guard.device_info(nad, bound_pci)
                except CniError:
                    info = None
    what = f"NetworkAttachmentDefinition {sel.namespace}/{sel.name}"
    net = delegates.nad_network(nad, ctx.conf.conf_dir, ctx.svc.conf_files, what)
    cand = delegates.candidate(net, sel, what, managed)._replace(
        bound_pci=bound_pci, resource_name=delegates.resource_name(nad), foreign=foreign, device_info=info
    )
    return lookup.give(cand) if lookup is not None else cand


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


def _registry(pod: Json, *, guarded: bool) -> Registry | None:
    """The Pod's managed-networks registry, when the guard runs and the Pod has one."""
    meta = pod.get("metadata") or {}
    if not (guarded and keys.REGISTRY_ANNOTATION in (meta.get("annotations") or {})):
        return None
    from cni_shim.core import guard  # noqa: PLC0415 - contract parsers only for Pods that use shadows

    return guard.pod_registry(pod)


def pod_candidates(
    ctx: Context,
    kube: KubeApi,
    pod: Json,
    base: list[Candidate],
    *,
    guarded: bool,
    lookup: DeviceLookup | None = None,
) -> list[Candidate]:
    """`base` with the Pod's default-network annotation (a new master) and selected NADs added,
    checked as Multus checks them; `guarded` runs the managed-shadow guard (ADD only); `lookup`
    gives resourceName NADs their devices (ADD)."""
    meta = pod.get("metadata") or {}
    pod_ns = str(meta.get("namespace", ctx.pod_args.namespace))
    out = list(base)
    registry = _registry(pod, guarded=guarded)
    text = (meta.get("annotations") or {}).get(keys.NETWORKS_ANNOTATION)
    with _annotation_errors():
        default_sel = delegates.default_network_selection(pod, ctx.conf.multus_namespace)
        selections = parse_network_selections(text, pod_ns) if isinstance(text, str) else []
    if default_sel is not None:
        nad = kube.get_nad(default_sel.namespace, default_sel.name)
        with multus_context(
            "TryLoadPodDelegates: error in loading K8s cluster default network from pod annotation: "
            "tryLoadK8sPodDefaultNetwork: failed getting the delegate: "
        ):
            cand = _nad_candidate(ctx, nad, default_sel, pod, registry, guarded=guarded, lookup=lookup)
        out = [cand._replace(master=True), *out[1:]] if out else [cand._replace(master=True)]
    if ctx.conf.namespace_isolation:
        with multus_context(_GETTING_NETWORKS):
            delegates.check_isolation(selections, pod_ns, ctx.conf.global_namespaces)
    if registry is not None:
        from cni_shim.core import guard  # noqa: PLC0415 - contract parsers only for Pods that use shadows

        guard.check_registry(registry, selections, ctx.pod_args.label())
    seen_managed: set[tuple[str, str]] = set()
    for sel, nad in zip(selections, _nads(kube, selections), strict=True):
        with multus_context(_GETTING_NETWORKS + "GetNetworkDelegates: failed getting the delegate: "):
            cand = _nad_candidate(ctx, nad, sel, pod, registry, guarded=guarded, lookup=lookup)
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
