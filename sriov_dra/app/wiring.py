"""Wiring the node agent: which adapters each flow gets, and the threads that run them."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client
from kubernetes import config as kube_config

from sriov_dra.advertise.controller import PolicyController
from sriov_dra.advertise.healthmonitor import DeviceHealthMonitor
from sriov_dra.advertise.inventory import DeviceState
from sriov_dra.advertise.slices import SlicePublisher
from sriov_dra.app.config import MULTUS, Config
from sriov_dra.core.checkpointrecovery import Recovery
from sriov_dra.core.devicehealth import Verdict
from sriov_dra.kube.resources import (
    KubeClaims,
    KubeEvents,
    KubeNads,
    KubePods,
    KubePolicySource,
    KubeShadowLister,
    KubeSlices,
)
from sriov_dra.kube.transport import watch_forever
from sriov_dra.kubeletplugin.api import NodeService
from sriov_dra.kubeletplugin.health import HealthServer
from sriov_dra.kubeletplugin.server import KubeletPlugin, SocketPaths
from sriov_dra.observe.bindingreporter import NULL_OBSERVER, BindingReporter, PhaseObserver
from sriov_dra.observe.eventrecorder import NORMAL, WARNING, EventRecorder, InvolvedObject
from sriov_dra.observe.metrics import CountingSlices, DriverMetrics
from sriov_dra.ports import EventSink, PolicySource
from sriov_dra.prepare.consumer import ConsumerResolver
from sriov_dra.prepare.devicestatus import DeviceStatusWriter
from sriov_dra.prepare.host import HostDevices
from sriov_dra.prepare.managed import LiveConsumer, ManagedPreparer
from sriov_dra.prepare.plain import PlainPreparer
from sriov_dra.reasons import CHECKPOINT_RECOVERED, DEVICE_RECOVERED
from sriov_dra.recovery.claimrepair import ClaimRepairer
from sriov_dra.recovery.listing import PassLister
from sriov_dra.recovery.recoveredstart import ApiListings, open_checkpoint
from sriov_dra.recovery.repair import RepairWorker
from sriov_dra.state.cdi import CdiDir
from sriov_dra.state.checkpoint import GenerationFiles, PreparedClaims
from sriov_dra.sysfs.discovery import discover
from sriov_dra.sysfs.linkstate import observe
from sriov_dra.sysfs.vfdriver import SysfsVfDriver

log = logging.getLogger("sriov-dra-driver")


class TriggeredWorker(Protocol):
    """A loop that runs until stop and can be woken early (PolicyController, RepairWorker)."""

    def run(self, stop: threading.Event) -> None: ...

    def trigger(self) -> None: ...


def start_threads(
    stop: threading.Event,
    controller: TriggeredWorker,
    sources: Sequence[tuple[str, Callable[..., Any], Mapping[str, Any]]],
    watch: Callable[[str, Callable[..., Any], Mapping[str, Any], Callable[[], None], threading.Event], None],
    name: str = "policy-reconcile",
) -> list[threading.Thread]:
    threads = [threading.Thread(target=controller.run, args=(stop,), name=name, daemon=True)]
    threads += [
        threading.Thread(
            target=watch, args=(what, fn, kw, controller.trigger, stop), name=f"watch-{what}", daemon=True
        )
        for what, fn, kw in sources
    ]
    for t in threads:
        t.start()
    return threads


def managed_service(
    api: client.ApiClient,
    *,
    node_name: str,
    node_uid: str,
    devices: HostDevices,
    checkpoint: PreparedClaims,
    state: DeviceState,
    source: PolicySource,
    observer: PhaseObserver | None = None,
) -> ManagedPreparer:
    """The managed NodeService over the live API (--multus-auto-attach)."""
    pods = KubePods(api)
    claims = KubeClaims(api)

    def eligible_attributes(name: str) -> Mapping[str, object] | None:
        advertised = state.lookup(name)[1]
        return None if advertised is None else dict(advertised.attributes)

    return ManagedPreparer(
        claims=claims,
        devices=devices,
        resolver=ConsumerResolver(
            pods=pods,
            claims=claims,
            node_name=node_name,
            node_uid=node_uid,
            live_node_uid=lambda: source.node()[0],
        ),
        nads=KubeNads(api),
        pods=pods,
        checkpoint=checkpoint,
        node_name=node_name,
        node_uid=node_uid,
        eligible_attributes=eligible_attributes,
        observer=observer or NULL_OBSERVER,
        device_status=DeviceStatusWriter(claims),
    )


def repair_service(
    api: client.ApiClient,
    service: ManagedPreparer,
    checkpoint: PreparedClaims,
    *,
    node_name: str,
    node_uid: str,
    source: PolicySource,
) -> tuple[ClaimRepairer[LiveConsumer], PassLister]:
    """Repair over the live API: each claim's decisions, taken through the managed service, and the
    listings a pass checks its claims against."""
    lister = PassLister(
        checkpoint=checkpoint,
        node_name=node_name,
        node_uid=node_uid,
        live_node_uid=lambda: source.node()[0],
        shadows=KubeShadowLister(api),
        pods=KubePods(api),
        claims=KubeClaims(api),
        claim_reader=KubeClaims(api),
    )
    return ClaimRepairer(service, checkpoint, node_uid=node_uid), lister


def start_repair(
    stop: threading.Event,
    repairer: ClaimRepairer[LiveConsumer],
    lister: PassLister,
    checkpoint: PreparedClaims,
    *,
    interval: float,
    observer: PhaseObserver,
    metrics: DriverMetrics,
    sources: Sequence[tuple[str, Callable[..., Any], Mapping[str, Any]]],
    watch: Callable[[str, Callable[..., Any], Mapping[str, Any], Callable[[], None], threading.Event], None],
) -> RepairWorker:
    """The repair worker's first pass, run now (before the plugin serves), then its thread and the
    watches that wake it early."""
    worker = RepairWorker(
        repairer,
        checkpoint.snapshot_all,
        interval=interval,
        observer=observer,
        metrics=metrics,
        listing=lister.list_for_pass,
    )
    outcomes = worker.run_once()
    failed = {uid: why for uid, why in outcomes.items() if why}
    log.info("start-up repair: %d claims, %d not converged %s", len(outcomes), len(failed), failed or "")
    start_threads(stop, worker, sources, watch, name="repair")
    return worker


EVENT_DRAIN_SECONDS = 2.0
# How long the driver waits for kubelet to register it before it serves its registration socket anew.
REANNOUNCE_AFTER_S = 30.0


def api_client(kubeconfig: str | None) -> client.ApiClient:
    """The API client from a kubeconfig file, or else from the Pod's service account."""
    if kubeconfig:
        api: client.ApiClient = kube_config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        return api
    kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


def serve_managed(
    api: client.ApiClient,
    cfg: Config,
    stop: threading.Event,
    *,
    node_uid: str,
    devices: HostDevices,
    checkpoint: PreparedClaims,
    state: DeviceState,
    source: PolicySource,
    observer: PhaseObserver,
    metrics: DriverMetrics,
) -> ManagedPreparer:
    """The managed NodeService, once the repair worker's first pass has run: before kubelet can reach
    the plugin (spec 8.3: repair starts once the checkpoint is loaded and before the driver serves
    managed prepares)."""
    service = managed_service(
        api,
        node_name=cfg.node_name,
        node_uid=node_uid,
        devices=devices,
        checkpoint=checkpoint,
        state=state,
        source=source,
        observer=observer,
    )
    repairer, lister = repair_service(
        api, service, checkpoint, node_name=cfg.node_name, node_uid=node_uid, source=source
    )
    start_repair(
        stop,
        repairer,
        lister,
        checkpoint,
        interval=cfg.repair_interval,
        observer=observer,
        metrics=metrics,
        sources=[KubeShadowLister(api).watch_source(node_uid)],
        watch=watch_forever,
    )
    return service


def run(cfg: Config, stop: threading.Event) -> None:
    """Start everything, serve until `stop` is set, then shut down cleanly."""
    paths = SocketPaths(cfg.registrar_dir, cfg.plugins_dir)
    paths.plugin_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
    cfg.cdi_root.mkdir(parents=True, exist_ok=True, mode=0o750)
    api = api_client(cfg.kubeconfig)

    state = DeviceState(discover(cfg.sysfs_root))
    log.info("discovered %d VFs under %s", len(state.inventory()), cfg.sysfs_root)
    source = KubePolicySource(api, cfg.namespace, cfg.node_name)
    node_uid, _labels = source.node()
    slices = KubeSlices(api, cfg.node_name)
    managed = cfg.multus_auto_attach and cfg.configuration_mode == MULTUS
    metrics = DriverMetrics()
    checkpoint_path = paths.plugin_dir / "checkpoint.json"
    checkpoint = open_checkpoint(
        GenerationFiles(checkpoint_path),
        node_name=cfg.node_name,
        node_uid=node_uid,
        listings=ApiListings(KubeShadowLister(api), KubeClaims(api), KubePods(api)) if managed else None,
        pci_of={name: vf.pci_address for name, vf in state.inventory().items()},
        rdma_of={name: vf.rdma for name, vf in state.inventory().items() if vf.rdma is not None},
        now=datetime.now(UTC),
        tell=lambda recovery: tell_recovery(recovery, metrics, KubeEvents(api), node_uid),
    )
    log.info("checkpoint %s holds %d prepared claims", checkpoint_path, len(checkpoint.snapshot_all()))
    metrics.watch_bindings(checkpoint.snapshot_all)
    if cfg.metrics_port >= 0:
        log.info("Prometheus metrics on port %d", metrics.serve(cfg.metrics_port))
    controller = PolicyController(
        source,
        state,
        SlicePublisher(CountingSlices(slices, metrics), cfg.node_name, node_uid),
        managed=managed,
    )
    # Every flap is told: health Events are not de-duplicated (remember=0).
    health_events = EventRecorder(KubeEvents(api), host=cfg.node_name, remember=0).start()
    node = InvolvedObject("Node", "v1", "default", cfg.node_name, node_uid)
    monitor = DeviceHealthMonitor(
        lambda: observe(cfg.sysfs_root, state.inventory()),
        state,
        pool=cfg.node_name,
        republish=controller.trigger,
        tell=lambda device, verdict: tell_health(device, verdict, metrics, health_events, node),
    )
    monitor.check()  # before the first publish, so a VF already down is never offered untainted
    metrics.watch_unhealthy(monitor.unhealthy)
    devices = HostDevices(
        node_name=cfg.node_name,
        inventory=lambda name: state.lookup(name)[0],
        checkpoint=checkpoint,
        cdi_specs=CdiDir(cfg.cdi_root, dev_root=cfg.dev_root),
        vf_driver=SysfsVfDriver(cfg.sysfs_root),
    )
    service: NodeService = PlainPreparer(claims=KubeClaims(api), devices=devices, checkpoint=checkpoint)
    recorder: EventRecorder | None = None
    if managed:
        recorder = EventRecorder(KubeEvents(api), host=cfg.node_name).start()
        service = serve_managed(
            api,
            cfg,
            stop,
            node_uid=node_uid,
            devices=devices,
            checkpoint=checkpoint,
            state=state,
            source=source,
            observer=BindingReporter(recorder, metrics),
            metrics=metrics,
        )
    # Eligibility must be known before kubelet can reach the plugin: a prepare that raced the first
    # policy pass would be refused as DeviceNotEligible for a device that is in fact advertised.
    try:
        controller.reconcile()
    except Exception:
        log.exception("first policy reconcile failed; the reconcile loop retries")
    plugin = KubeletPlugin(paths, service, monitor)
    log.info("serving %s and %s", paths.dra_socket, paths.registration_socket)
    health = (
        HealthServer(
            paths,
            cfg.healthcheck_port,
            host=cfg.healthcheck_host,
            registration=plugin.registration,
            calls=plugin.calls,
        )
        if cfg.healthcheck_port >= 0
        else None
    )
    if health is not None:
        log.info("gRPC health check on %s port %d", cfg.healthcheck_host or "every address", health.port)
    start_threads(stop, controller, source.watch_sources(slices), watch_forever)
    threading.Thread(target=monitor.run, args=(stop,), name="device-health", daemon=True).start()
    threading.Thread(target=report_registration, args=(plugin, cfg.registrar_dir, stop), daemon=True).start()
    try:
        stop.wait()
    finally:
        if health is not None:
            health.stop()
        plugin.stop()
        if recorder is not None:
            recorder.close(EVENT_DRAIN_SECONDS)  # what is queued still goes out, briefly
        health_events.close(EVENT_DRAIN_SECONDS)
        api.close()  # type: ignore[no-untyped-call]
        log.info("stopped")


def tell_recovery(recovery: Recovery, metrics: DriverMetrics, events: EventSink, node_uid: str) -> None:
    """A recovered start, told where an administrator looks: the log, a metric, an Event on the Node."""
    message = recovery.message()
    log.warning("%s: %s", CHECKPOINT_RECOVERED, message)
    metrics.checkpoint_recoveries.labels(recovery.start.generation).inc()
    node = InvolvedObject("Node", "v1", "default", recovery.node, node_uid)
    EventRecorder(events, host=recovery.node).emit(node, WARNING, CHECKPOINT_RECOVERED, message)


def tell_health(
    device: str, verdict: Verdict, metrics: DriverMetrics, events: EventRecorder, node: InvolvedObject
) -> None:
    """A VF's health change, told where an administrator looks: the log, a metric, an Event on the Node."""
    metrics.device_health_changes.labels(
        "Healthy" if verdict.healthy else "Unhealthy", verdict.reason or DEVICE_RECOVERED
    ).inc()
    if verdict.healthy:
        message = f"{DEVICE_RECOVERED}: VF {device} is healthy again (untainted, reported Healthy)"
        log.info("%s", message)
        events.emit(node, NORMAL, DEVICE_RECOVERED, message)
    else:
        log.warning("%s; tainted NoSchedule and reported Unhealthy to the kubelet", verdict.message)
        events.emit(node, WARNING, verdict.reason, verdict.message)


def report_registration(
    plugin: KubeletPlugin, registry_dir: Path, stop: threading.Event, after: float = REANNOUNCE_AFTER_S
) -> None:
    """Until kubelet registers the plugin, say so and serve the registration socket anew every
    `after` seconds. Upstream exits after 30 s unregistered and lets its DaemonSet restart it; we
    keep serving (kubelet may start later) and give its plugin watcher a new socket instead."""
    while not plugin.registration.wait_registered(after):
        if stop.is_set():
            return
        log.warning(
            "kubelet has not registered the plugin after %.0f s; is %s kubelet's plugin registry? "
            "Serving the registration socket anew",
            after,
            registry_dir,
        )
        plugin.reannounce()
    log.info("kubelet registered the plugin")
