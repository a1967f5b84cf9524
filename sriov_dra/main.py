"""The `sriov-dra-driver` node agent: discovery, policies, ResourceSlices and the kubelet plugin."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import click

from sriov_contract.errors import ReasonedError
from sriov_dra.app.config import Config

log = logging.getLogger("sriov-dra-driver")
# A click-decorated command function.
FC = TypeVar("FC", bound=Callable[..., Any])


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
@_path_option("--dev-root", "dev_root", "DEV_ROOT", "/dev")
@click.option(
    "--configuration-mode", envvar="CONFIGURATION_MODE", default="STANDALONE", help="STANDALONE or MULTUS"
)
@click.option("--multus-auto-attach/--no-multus-auto-attach", envvar="MULTUS_AUTO_ATTACH", default=False)
@click.option("--healthcheck-port", envvar="HEALTHCHECK_PORT", default=-1, type=int)
@click.option(
    "--healthcheck-host",
    envvar="HEALTHCHECK_HOST",
    default="",
    help="the probes' address; every one when unset",
)
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
        # Imported here so that --help and flag errors answer without loading the API client or gRPC.
        from sriov_dra.app import wiring  # noqa: PLC0415

        wiring.run(cfg, stop)
    except ReasonedError as err:
        click.echo(f"sriov-dra-driver: {err.reason}: {err.message}", err=True)
        sys.exit(2)
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("sriov_dra.kubeletplugin.gen"):
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
