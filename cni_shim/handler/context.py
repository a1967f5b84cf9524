"""One request as every verb sees it: the request, its config and Pod, the adapters, and the few
steps several verbs share (the API client, the readiness wait, a delegate's runtime config)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from cni_shim import reasons
from cni_shim.core import cniargs, delegateplan, netconf, podevents, protocol
from cni_shim.errors import TRY_AGAIN_LATER, CniError
from cni_shim.runner import RuntimeConf
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

    from cni_shim.handler import Services
    from cni_shim.ports import CacheStore, Executor, KubeApi, Log

    Json = dict[str, Any]


READINESS_TIMEOUT = 45.0


class Context(TypedTuple):
    req: protocol.Request
    conf: netconf.NetConf
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

    def record_event(self, pod: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        if self.conf.pod_events and self.svc.events is not None:
            ref = podevents.pod_reference(pod)
            self.events.append(podevents.event(ref, event_type, reason, message, time.time()))

    def publish_events(self) -> None:
        """Hand this ADD's Events to the sink; a failure costs only a log line, never the ADD."""
        if not self.events or self.svc.events is None:
            return
        events, self.events[:] = list(self.events), []
        try:
            self.svc.events.publish(podevents.combine(events))
        except Exception as exc:
            self._event_failure(exc)

    def settle_events(self) -> None:
        if self.svc.events is None:
            return
        try:
            self.svc.events.settle()
        except Exception as exc:
            self._event_failure(exc)

    def _event_failure(self, exc: Exception) -> None:
        self.log.warning(f"{self.prefix()}could not record the Pod Events: {exc}")


def kube(ctx: Context) -> KubeApi | None:
    try:
        return ctx.svc.kube_for(ctx.conf)
    except CniError as exc:
        raise exc.wrap("Multus: error getting k8s client: ") from exc


def wait_readiness(ctx: Context) -> None:
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


def prober(ctx: Context) -> Executor:
    versions_for = ctx.svc.versions_for
    return versions_for(ctx.conf.cni_dir) if versions_for is not None else ctx.svc.executor


def runtime_conf(
    ctx: Context, p: delegateplan.Plan, d: delegateplan.PlannedDelegate, *, adding: bool
) -> RuntimeConf:
    return RuntimeConf(
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


def request_plan(ctx: Context, delegates: tuple[delegateplan.PlannedDelegate, ...] = ()) -> delegateplan.Plan:
    """A plan for this request's container, netns, interface and Pod."""
    return delegateplan.Plan(
        container_id=ctx.req.container_id,
        netns=ctx.req.netns,
        ifname=ctx.req.ifname,
        pod_namespace=ctx.pod_args.namespace,
        pod_name=ctx.pod_args.name,
        pod_uid=ctx.pod_args.uid,
        delegates=delegates,
    )


def bare_runtime_conf(ctx: Context) -> RuntimeConf:
    """STATUS and GC speak to a network, not to one attachment of it."""
    return RuntimeConf("", "", "", (), {}, ctx.search_path, ctx.svc.delegate_env)


def is_guard(exc: CniError) -> bool:
    """The managed-shadow guard's refusals: Multus has no such check, so they keep our own text."""
    return exc.reason.startswith("ManagedShadow")


class multus_context:
    """Prefix a failure with the context Multus's error chain gives it (not the guard's own).

    A class rather than @contextmanager: `contextlib` (and the `functools` under it) would be
    imported by every thin invocation, DEL included."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, CniError) and not is_guard(exc):
            raise exc.wrap(self.prefix) from exc
