"""The daemon's composition root: one API client, Pod and NAD informers, the unix-socket server.

With `multusConfigFile: auto` it writes the node's 00-multus.conf from the primary CNI config
(cni_shim.node.autoconf), as Multus's thick daemon does; otherwise it writes no CNI config file
(our DaemonSet's init container owns 00-auto-sriov.conf). Every request gets the thin mode's
adapters (cni_shim.app.thin) with the daemon's executor and API views swapped in.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from cni_shim.app import thin
from cni_shim.app.config import DaemonConfig
from cni_shim.core import autoconf
from cni_shim.handler import Services
from cni_shim.kube.daemon_client import ApiServer
from cni_shim.kube.informers import FIRST_LIST, Cache, nad_informer, pod_informer
from cni_shim.kube.views import CachedView, LiveView
from cni_shim.node import allocator
from cni_shim.node.autoconf import ConfigWriter
from cni_shim.node.chroot import ChrootExecutor
from cni_shim.node.execution import ProcessExecutor
from cni_shim.node.versioncache import VersionCache
from cni_shim.ports import KubeApi
from cni_shim.thick.dispatch import Dispatcher
from cni_shim.thick.eventqueue import EventQueue
from cni_shim.thick.forward import SOCKET_NAME
from cni_shim.thick.health import HealthServer
from cni_shim.thick.metrics import Metrics
from cni_shim.thick.server import Hooks, Server, State, listen
from sriov_contract.errors import ReasonedError

SYNC_TIMEOUT = 20.0
DRAIN_SECONDS = 10.0
# How long a thread that wants the GIL waits before the holder must let go (CPython's default is
# 5 ms). A request thread waking from a delegate's exit or an API answer should not wait behind
# an informer decoding a watch event; the daemon's threads are latency-bound, not throughput-bound.
SWITCH_INTERVAL = 0.0005
# Threads for a live ADD's concurrent NAD reads; the API client keeps up to 5 connections per
# core, so these fit beside the request threads without opening throwaway ones.
NAD_READERS = 4

Log = Callable[..., None]


class DaemonViews:
    def __init__(
        self,
        api: ApiServer | None,
        pods: Cache | None,
        nads: Cache | None,
        metrics: Metrics,
        readers: Executor | None = None,
    ) -> None:
        self._api = api
        self._pods = pods
        self._nads = nads
        self._metrics = metrics
        self._readers = readers

    def live(self, *, prefetch: bool = True) -> KubeApi | None:
        if self._api is None:
            return None
        guesses = self._pods.store if self._pods and prefetch else None
        return LiveView(self._api, self._metrics, self._readers, guesses)

    def cached(self) -> KubeApi | None:
        if self._api is None or self._pods is None or self._nads is None:
            return None
        return CachedView(self._api, self._metrics, self._pods.store, self._nads.store)


def _connect(conf: DaemonConfig, env: dict[str, str]) -> ApiServer | None:
    if not conf.kubeconfig and not env.get("KUBERNETES_SERVICE_HOST"):
        return None  # Multus's no-Kubernetes mode: delegates from the config only
    return ApiServer.connect(conf.kubeconfig)


def config_writer(conf: DaemonConfig, log: Log) -> ConfigWriter | None:
    """Multus's config manager, when the daemon config asks for `multusConfigFile: auto`.

    Multus defaults the key to auto; we generate only when it says so, because our own DaemonSet
    installs its conf file from an init container."""
    folded = {str(k).lower(): v for k, v in conf.raw.items()}
    if folded.get("multusconfigfile") != autoconf.AUTO:
        return None
    return ConfigWriter(autoconf.settings(conf.raw), log)


def _start_informers(
    api: ApiServer | None, node_name: str, metrics: Metrics, stop: threading.Event, log: Log
) -> list[Cache]:
    """The Pod and NAD informers (this node's: cni_shim.kube.informers), started; none without Kubernetes."""
    if api is None:
        return []
    warn = lambda message: log("warning", message)  # noqa: E731

    def listed(kind: str, cause: str, count: int, version: str) -> None:
        metrics.informer_list(kind, cause)
        if cause != FIRST_LIST:  # after a 410 or an outage: the proof that the cache caught up
            log("info", f"{kind} informer relisted", cause=cause, objects=count, resourceVersion=version)

    informers = [pod_informer(api, node_name, warn, listed), nad_informer(api, node_name, warn, listed)]
    for informer in informers:
        informer.start(stop)
        metrics.track_cache(informer.kind, informer.store.__len__)
    return informers


def _dispatcher(
    conf: DaemonConfig,
    api: ApiServer | None,
    informers: Sequence[Cache],
    metrics: Metrics,
    log: Log,
    *,
    pod_events: EventQueue | None,
    generated: bool,
) -> Dispatcher:
    pods, nads = (informers[0], informers[1]) if informers else (None, None)
    rooted = conf.chroot_dir not in ("", "/")
    executor = VersionCache(
        ChrootExecutor(conf.chroot_dir) if rooted else ProcessExecutor(), conf.chroot_dir if rooted else ""
    )

    def base(env: Mapping[str, str]) -> Services:
        return thin.services(env)._replace(executor=executor, versions_for=None)

    readers = ThreadPoolExecutor(NAD_READERS, thread_name_prefix="nad-read") if api is not None else None
    # With a generated config the daemon itself waited for its readiness file and watches it, so
    # that key of the daemon config is not laid over requests (Multus's ignoreReadinessIndicator).
    return Dispatcher(
        conf.raw,
        DaemonViews(api, pods, nads, metrics, readers),
        metrics,
        log,
        base_services=base,
        pod_events=pod_events,
        drop_keys=("readinessindicatorfile",) if generated else (),
    )


def _test_hooks(informers: Sequence[Cache]) -> Hooks:
    def freeze() -> None:
        for informer in informers:
            informer.store.freeze()

    return Hooks(snapshot=lambda: {i.kind: i.store.versions() for i in informers}, freeze=freeze)


class _Lifecycle:
    """Ready once the caches are filled; draining on SIGTERM/SIGINT or when the readiness file goes."""

    def __init__(self, stop: threading.Event, state: State, server: Server, log: Log) -> None:
        self._stop = stop
        self._state = state
        self._server = server
        self._log = log
        self.status = 0

    def start(self, informers: Sequence[Cache]) -> None:
        signal.signal(signal.SIGTERM, self._drain)
        signal.signal(signal.SIGINT, self._drain)
        threading.Thread(target=self._become_ready, args=(informers,), name="readiness", daemon=True).start()

    def _become_ready(self, informers: Sequence[Cache]) -> None:
        # /healthz answers at once; /readyz (which the shim waits for) once the caches are
        # filled, or after SYNC_TIMEOUT anyway, as Multus does: a cache miss is not fatal.
        deadline = time.monotonic() + SYNC_TIMEOUT
        for informer in informers:
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                self._log(
                    "warning",
                    f"{informer.kind} informer did not sync within {SYNC_TIMEOUT:g}s; serving anyway",
                )
        if not self._stop.is_set():
            self._state.ready.set()
            self._log("info", "ready")

    def shutdown(self, why: str) -> None:
        self._stop.set()
        self._state.ready.clear()
        self._log("info", f"{why}: draining in-flight requests, then stopping")

        def finish() -> None:
            self._state.wait_idle(DRAIN_SECONDS)
            self._server.shutdown()

        threading.Thread(target=finish, daemon=True).start()

    def _drain(self, signum: int, _frame: object) -> None:
        self.shutdown(f"signal {signum}")

    def readiness_lost(self) -> None:
        self.status = 2  # Multus: the readiness file went away, restart the daemon
        self.shutdown("the readiness indicator file is gone")


def run(conf: DaemonConfig, env: dict[str, str], *, test_hooks: bool, log: Log) -> int:
    sys.setswitchinterval(SWITCH_INTERVAL)
    # Before any thread exists: a thread's first allocation picks its arena.
    arena_max = allocator.cap_arenas(env)
    writer = config_writer(conf, log)
    if writer is not None:
        try:
            writer.prepare()
        except (ReasonedError, OSError) as exc:
            # Multus exits 2 here and writes no file; the runtime keeps the node NotReady.
            log("error", f"failed to create the configuration manager for the primary CNI plugin: {exc}")
            return 2
    metrics = Metrics()
    api = _connect(conf, env)
    stop = threading.Event()
    informers = _start_informers(api, conf.node_name, metrics, stop, log)
    pod_events = EventQueue(api, metrics, log).start() if api is not None else None
    dispatcher = _dispatcher(
        conf, api, informers, metrics, log, pod_events=pod_events, generated=writer is not None
    )
    hooks = _test_hooks(informers) if test_hooks else None
    if conf.metrics_address:
        metrics.serve(conf.metrics_address)
    state = State()
    server = listen(conf.socket_dir, dispatcher.serve, state, hooks)
    socket_path = os.path.join(conf.socket_dir, SOCKET_NAME)
    health = HealthServer(conf.health_address, socket_path) if conf.health_address else None
    life = _Lifecycle(stop, state, server, log)
    life.start(informers)
    log(
        "info",
        "serving",
        socket=socket_path,
        node=conf.node_name,
        kubernetes=api.server if api is not None else "",
        metrics=conf.metrics_address,
        health=conf.health_address,
        mallocArenaMax=arena_max,  # null: the environment or the C library decides
    )
    if writer is not None:
        try:
            writer.start(stop, life.readiness_lost)
        except (ReasonedError, OSError) as exc:
            log("error", f"failed to start config manager: {exc}")
            if health is not None:
                health.stop()
            server.server_close()
            return 3
    try:
        server.serve_forever()
    finally:
        stop.set()
        if health is not None:
            health.stop()
        server.server_close()
        if writer is not None:
            writer.remove()  # Multus deletes 00-multus.conf when its config manager stops
    if pod_events is not None:
        pod_events.stop(DRAIN_SECONDS)
    return life.status
