"""The `sriov-dra-driver` node agent: discovery, policies, ResourceSlices and the kubelet plugin."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import click

from driver.config import Config
from sriov_contract.errors import ReasonedError

if TYPE_CHECKING:
    from driver.kubeletplugin.server import KubeletPlugin

log = logging.getLogger("sriov-dra-driver")
# A click-decorated command function.
FC = TypeVar("FC", bound=Callable[..., Any])


def run(cfg: Config, stop: threading.Event) -> None:
    """Start everything, serve until `stop` is set, then shut down cleanly."""
    # Heavy imports stay here so `--help` and flag errors answer instantly.
    from kubernetes import client  # noqa: PLC0415
    from kubernetes import config as kube_config  # noqa: PLC0415

    from driver.agent import (  # noqa: PLC0415
        PolicyController,
        managed_service,
        start_threads,
    )
    from driver.cdi import CdiDir  # noqa: PLC0415
    from driver.checkpoint import FileStorage, PreparedClaims  # noqa: PLC0415
    from driver.config import MULTUS  # noqa: PLC0415
    from driver.discovery import discover  # noqa: PLC0415
    from driver.inventory import DeviceState  # noqa: PLC0415
    from driver.kube import KubeClaims, KubePolicySource, KubeSlices, watch_forever  # noqa: PLC0415
    from driver.kubeletplugin.api import NodeService  # noqa: PLC0415
    from driver.kubeletplugin.health import HealthServer  # noqa: PLC0415
    from driver.kubeletplugin.server import KubeletPlugin, SocketPaths  # noqa: PLC0415
    from driver.metrics import CountingSlices, DriverMetrics  # noqa: PLC0415
    from driver.prepare import Preparer  # noqa: PLC0415
    from driver.slices import SlicePublisher  # noqa: PLC0415
    from driver.vfdriver import SysfsVfDriver  # noqa: PLC0415

    paths = SocketPaths(cfg.registrar_dir, cfg.plugins_dir)
    paths.plugin_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
    cfg.cdi_root.mkdir(parents=True, exist_ok=True, mode=0o750)
    if cfg.kubeconfig:
        api = kube_config.new_client_from_config(config_file=cfg.kubeconfig)  # type: ignore[no-untyped-call]
    else:
        kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
        api = client.ApiClient()

    state = DeviceState(discover(cfg.sysfs_root))
    log.info("discovered %d VFs under %s", len(state.inventory()), cfg.sysfs_root)
    checkpoint_path = paths.plugin_dir / "checkpoint.json"
    checkpoint = PreparedClaims(FileStorage(checkpoint_path), str(checkpoint_path))
    log.info("checkpoint %s holds %d prepared claims", checkpoint_path, len(checkpoint.snapshot_all()))

    source = KubePolicySource(api, cfg.namespace, cfg.node_name)
    node_uid, _labels = source.node()
    slices = KubeSlices(api, cfg.node_name)
    managed = cfg.multus_auto_attach and cfg.configuration_mode == MULTUS
    metrics = DriverMetrics()
    metrics.watch_bindings(checkpoint.snapshot_all)
    if cfg.metrics_port >= 0:
        log.info("Prometheus metrics on port %d", metrics.serve(cfg.metrics_port))
    controller = PolicyController(
        source,
        state,
        SlicePublisher(CountingSlices(slices, metrics), cfg.node_name, node_uid),
        managed=managed,
    )
    preparer = Preparer(
        node_name=cfg.node_name,
        claims=KubeClaims(api),
        inventory=lambda name: state.lookup(name)[0],
        checkpoint=checkpoint,
        cdi_specs=CdiDir(cfg.cdi_root),
        vf_driver=SysfsVfDriver(cfg.sysfs_root),
    )
    service: NodeService = preparer
    if managed:
        from driver.agent import start_repair  # noqa: PLC0415
        from driver.events import BindingReporter, EventRecorder  # noqa: PLC0415
        from driver.kube import KubeEvents, KubeShadowLister  # noqa: PLC0415

        reporter = BindingReporter(EventRecorder(KubeEvents(api), host=cfg.node_name), metrics)
        managed_preparer = managed_service(
            api,
            node_name=cfg.node_name,
            node_uid=node_uid,
            host=preparer,
            checkpoint=checkpoint,
            state=state,
            source=source,
            observer=reporter,
        )
        # The repair worker's first pass runs before kubelet can reach the plugin (spec 8.3).
        start_repair(
            stop,
            managed_preparer,
            checkpoint,
            interval=cfg.repair_interval,
            observer=reporter,
            metrics=metrics,
            sources=[KubeShadowLister(api).watch_source(node_uid)],
            watch=watch_forever,
        )
        service = managed_preparer
    # Eligibility must be known before kubelet can reach the plugin: a prepare that raced the first
    # policy pass would be refused as DeviceNotEligible for a device that is in fact advertised.
    try:
        controller.reconcile()
    except Exception:
        log.exception("first policy reconcile failed; the reconcile loop retries")
    plugin = KubeletPlugin(paths, service)
    log.info("serving %s and %s", paths.dra_socket, paths.registration_socket)
    health = HealthServer(paths, cfg.healthcheck_port) if cfg.healthcheck_port >= 0 else None
    if health is not None:
        log.info("gRPC health check on port %d", health.port)
    start_threads(stop, controller, source.watch_sources(slices), watch_forever)
    threading.Thread(target=_report_registration, args=(plugin, cfg.registrar_dir), daemon=True).start()
    try:
        stop.wait()
    finally:
        if health is not None:
            health.stop()
        plugin.stop()
        api.close()
        log.info("stopped")


def _report_registration(plugin: KubeletPlugin, registry_dir: Path) -> None:
    # Upstream aborts after 30 s without kubelet; we keep serving (kubelet may start later) but say so.
    if plugin.registration.wait_registered(30.0):
        log.info("kubelet registered the plugin")
    else:
        log.warning(
            "kubelet has not registered the plugin after 30 s; is %s kubelet's plugin registry?", registry_dir
        )


def _path_option(flag: str, field: str, envvar: str, default: str) -> Callable[[FC], FC]:
    return click.option(flag, field, envvar=envvar, default=default, type=click.Path(path_type=Path))


@click.command(context_settings={"auto_envvar_prefix": None, "show_default": True})
@click.option("--node-name", envvar="NODE_NAME", default="", help="node to manage")
@click.option("--namespace", envvar="NAMESPACE", default="dra-driver-sriov", help="namespace of policies")
@_path_option("--cdi-root", "cdi_root", "CDI_ROOT", "/var/run/cdi")
@_path_option(
    "--kubelet-registrar-directory-path",
    "registrar_dir",
    "KUBELET_REGISTRAR_DIRECTORY_PATH",
    "/var/lib/kubelet/plugins_registry",
)
@_path_option(
    "--kubelet-plugins-directory-path",
    "plugins_dir",
    "KUBELET_PLUGINS_DIRECTORY_PATH",
    "/var/lib/kubelet/plugins",
)
@_path_option("--sysfs-root", "sysfs_root", "SYSFS_ROOT", "/sys")
@click.option(
    "--configuration-mode", envvar="CONFIGURATION_MODE", default="STANDALONE", help="STANDALONE or MULTUS"
)
@click.option("--multus-auto-attach/--no-multus-auto-attach", envvar="MULTUS_AUTO_ATTACH", default=False)
@click.option("--healthcheck-port", envvar="HEALTHCHECK_PORT", default=-1, type=int)
@click.option("--kubeconfig", envvar="KUBECONFIG", default=None, help="in-cluster config when unset")
@click.option("--repair-interval", envvar="REPAIR_INTERVAL", default=30.0, type=float, help="seconds")
@click.option("--metrics-port", envvar="METRICS_PORT", default=-1, type=int, help="Prometheus, -1 off")
def cli(**opts: Any) -> None:
    """The SR-IOV DRA kubelet plugin."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        # Each option's parameter name is a Config field, so Config validates them all in one place.
        cfg = Config(**opts)
        stop = threading.Event()

        def on_signal(_sig: int, _frame: FrameType | None) -> None:
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, on_signal)
        run(cfg, stop)
    except ReasonedError as err:
        click.echo(f"sriov-dra-driver: {err.reason}: {err.message}", err=True)
        sys.exit(2)
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("driver.kubeletplugin.gen"):
            raise
        click.echo(
            "sriov-dra-driver: StubsNotGenerated: the kubelet gRPC stubs are missing; run 'make gen'",
            err=True,
        )
        sys.exit(2)
    except Exception as err:
        # Start-up failures (API server unreachable, permissions, sockets) end with one line; the
        # traceback goes to the debug log only.
        log.debug("start-up failed", exc_info=True)
        click.echo(f"sriov-dra-driver: StartupFailed: {err.__class__.__name__}: {err}", err=True)
        sys.exit(1)


def main() -> None:
    cli()
