"""The `cni-shim-daemon` thick-mode daemon: one API client, Pod and NAD informers, the unix-socket server.

With `multusConfigFile: auto` it writes the node's 00-multus.conf from the primary CNI config
(cni_shim.node.autoconf), as Multus's thick daemon does; otherwise it writes no CNI config file
(our DaemonSet's init container owns 00-auto-sriov.conf).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TextIO

import click

from cni_shim import reasons, wiring
from cni_shim.core import autoconf
from cni_shim.kube.daemon_client import ApiServer
from cni_shim.kube.informers import Informer, nad_informer, pod_informer
from cni_shim.kube.views import CachedView, LiveView
from cni_shim.node import allocator
from cni_shim.node.autoconf import ConfigWriter
from cni_shim.node.chroot import ChrootExecutor
from cni_shim.node.execution import ProcessExecutor
from cni_shim.node.versioncache import VersionCache
from cni_shim.ports import KubeApi
from cni_shim.thick.dispatch import Dispatcher
from cni_shim.thick.events import EventQueue
from cni_shim.thick.metrics import Metrics
from cni_shim.thick.server import Hooks, State, listen
from sriov_contract.errors import ReasonedError

DEFAULT_SOCKET_DIR = "/run/cni-shim/"
SYNC_TIMEOUT = 20.0
DRAIN_SECONDS = 10.0
# How long a thread that wants the GIL waits before the holder must let go (CPython's default is
# 5 ms). A request thread waking from a delegate's exit or an API answer should not wait behind
# an informer decoding a watch event; the daemon's threads are latency-bound, not throughput-bound.
SWITCH_INTERVAL = 0.0005
# Threads for a live ADD's concurrent NAD reads; the API client keeps up to 5 connections per
# core, so these fit beside the request threads without opening throwaway ones.
NAD_READERS = 4


@dataclass(frozen=True)
class DaemonConfig:
    raw: dict[str, Any]
    socket_dir: str
    kubeconfig: str
    chroot_dir: str
    metrics_address: str
    node_name: str


def load_config(path: str, env: dict[str, str], metrics_address: str = "") -> DaemonConfig:
    try:
        with open(path, "rb") as fh:
            raw = json.load(fh)
    except OSError as exc:
        raise ReasonedError(
            reasons.DAEMON_CONFIG_UNREADABLE, f"cannot read {path}: {exc.strerror}; mount it"
        ) from exc
    except ValueError as exc:
        raise ReasonedError(
            reasons.DAEMON_CONFIG_MALFORMED, f"{path} is not JSON: {exc}; fix the ConfigMap"
        ) from exc
    if not isinstance(raw, dict):
        raise ReasonedError(reasons.DAEMON_CONFIG_MALFORMED, f"{path} must hold a JSON object")
    port = raw.get("metricsPort")
    address = metrics_address or str(raw.get("metricsAddress") or "")
    if not address and isinstance(port, int) and not isinstance(port, bool) and port > 0:
        address = f":{port}"
    return DaemonConfig(
        raw=raw,
        socket_dir=str(raw.get("socketDir") or DEFAULT_SOCKET_DIR),
        kubeconfig=str(raw.get("kubeconfig") or ""),
        chroot_dir=str(raw.get("chrootDir") or ""),
        metrics_address=address,
        node_name=env.get("NODE_NAME") or env.get("MULTUS_NODE_NAME", ""),
    )


class JsonLog:
    """One JSON object per line: time, level, msg and the request's context fields."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def __call__(self, level: str, msg: str, **fields: Any) -> None:
        line = json.dumps(
            {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "level": level, "msg": msg, **fields}
        )
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


class DaemonViews:
    def __init__(
        self,
        api: ApiServer | None,
        pods: Informer | None,
        nads: Informer | None,
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


def config_writer(conf: DaemonConfig, log: Callable[..., None]) -> ConfigWriter | None:
    """Multus's config manager, when the daemon config asks for `multusConfigFile: auto`.

    Multus defaults the key to auto; we generate only when it says so, because our own DaemonSet
    installs its conf file from an init container."""
    folded = {str(k).lower(): v for k, v in conf.raw.items()}
    if folded.get("multusconfigfile") != autoconf.AUTO:
        return None
    return ConfigWriter(autoconf.settings(conf.raw), log)


def run(conf: DaemonConfig, env: dict[str, str], *, test_hooks: bool, log: JsonLog) -> int:
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
    informers: list[Informer] = []
    if api is not None:
        warn = lambda message: log("warning", message)  # noqa: E731
        informers = [pod_informer(api, conf.node_name, warn), nad_informer(api, warn)]
        for informer in informers:
            informer.start(stop)
            metrics.track_cache(informer.kind, informer.store.__len__)
    pods, nads = (informers[0], informers[1]) if informers else (None, None)
    rooted = conf.chroot_dir not in ("", "/")
    executor = VersionCache(
        ChrootExecutor(conf.chroot_dir) if rooted else ProcessExecutor(), conf.chroot_dir if rooted else ""
    )
    base = lambda env: wiring.services(env)._replace(executor=executor, versions_for=None)  # noqa: E731
    readers = ThreadPoolExecutor(NAD_READERS, thread_name_prefix="nad-read") if api is not None else None
    views = DaemonViews(api, pods, nads, metrics, readers)
    pod_events = EventQueue(api, metrics, log).start() if api is not None else None
    # With a generated config the daemon itself waited for its readiness file and watches it, so
    # that key of the daemon config is not laid over requests (Multus's ignoreReadinessIndicator).
    dispatcher = Dispatcher(
        conf.raw,
        views,
        metrics,
        log,
        base_services=base,
        pod_events=pod_events,
        drop_keys=("readinessindicatorfile",) if writer is not None else (),
    )
    hooks = None
    if test_hooks:

        def freeze() -> None:
            for informer in informers:
                informer.store.freeze()

        hooks = Hooks(snapshot=lambda: {i.kind: i.store.versions() for i in informers}, freeze=freeze)
    if conf.metrics_address:
        metrics.serve(conf.metrics_address)
    state = State()
    server = listen(conf.socket_dir, dispatcher.serve, state, hooks)

    def become_ready() -> None:
        # /healthz answers at once; /readyz (which the shim waits for) once the caches are
        # filled, or after SYNC_TIMEOUT anyway, as Multus does: a cache miss is not fatal.
        deadline = time.monotonic() + SYNC_TIMEOUT
        for informer in informers:
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                log(
                    "warning",
                    f"{informer.kind} informer did not sync within {SYNC_TIMEOUT:g}s; serving anyway",
                )
        if not stop.is_set():
            state.ready.set()
            log("info", "ready")

    status = [0]

    def shutdown(why: str) -> None:
        stop.set()
        state.ready.clear()
        log("info", f"{why}: draining in-flight requests, then stopping")

        def finish() -> None:
            state.wait_idle(DRAIN_SECONDS)
            server.shutdown()

        threading.Thread(target=finish, daemon=True).start()

    def drain(signum: int, _frame: object) -> None:
        shutdown(f"signal {signum}")

    def readiness_lost() -> None:
        status[0] = 2  # Multus: the readiness file went away, restart the daemon
        shutdown("the readiness indicator file is gone")

    signal.signal(signal.SIGTERM, drain)
    signal.signal(signal.SIGINT, drain)
    threading.Thread(target=become_ready, name="readiness", daemon=True).start()
    log(
        "info",
        "serving",
        socket=os.path.join(conf.socket_dir, "cni-shim.sock"),
        node=conf.node_name,
        kubernetes=api.server if api is not None else "",
        metrics=conf.metrics_address,
        mallocArenaMax=arena_max,  # null: the environment or the C library decides
    )
    if writer is not None:
        try:
            writer.start(stop, readiness_lost)
        except (ReasonedError, OSError) as exc:
            log("error", f"failed to start config manager: {exc}")
            server.server_close()
            return 3
    try:
        server.serve_forever()
    finally:
        stop.set()
        server.server_close()
        if writer is not None:
            writer.remove()  # Multus deletes 00-multus.conf when its config manager stops
    if pod_events is not None:
        pod_events.stop(DRAIN_SECONDS)
    return status[0]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config", "config_path", required=True, help="daemon-config.json; its keys override the shim's."
)
@click.option("--metrics-address", default="", help="host:port for /metrics (overrides metricsPort).")
@click.option(
    "--enable-test-hooks",
    is_flag=True,
    hidden=True,
    help="Serve /debug/informers and /debug/informers/freeze on the socket (tests only).",
)
def cli(config_path: str, metrics_address: str, enable_test_hooks: bool) -> None:
    """Serve cni-shim's thick mode on a unix socket."""
    log = JsonLog(sys.stderr)
    env = dict(os.environ)
    try:
        conf = load_config(config_path, env, metrics_address)
        status = run(conf, env, test_hooks=enable_test_hooks, log=log)
    except ReasonedError as exc:
        log("error", str(exc))
        sys.exit(1)
    except OSError as exc:
        log("error", f"StartupFailed: {exc}; check the socket directory and metrics address")
        sys.exit(1)
    sys.exit(status)


def main() -> None:
    cli()
