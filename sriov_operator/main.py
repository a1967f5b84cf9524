"""The `sriov-operator` console script: run the controllers (default) or inspect."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

from sriov_contract.errors import ReasonedError
from sriov_operator.app.inspect import as_text, inspect
from sriov_operator.app.wiring import Config, api_client, run, run_node_state
from sriov_operator.kube.api import OperatorApi


@click.group(invoke_without_command=True, context_settings={"show_default": True})
@click.option(
    "--namespace", envvar="OPERATOR_NAMESPACE", default="sriov-network-operator", help="operator namespace"
)
@click.option(
    "--policy-namespace",
    envvar="POLICY_NAMESPACE",
    default="",
    help="where generated objects go (default: --namespace)",
)
@click.option(
    "--resource-prefix", envvar="RESOURCE_PREFIX", default="openshift.io", help='"" for a bare resourceName'
)
@click.option("--controllers", envvar="CONTROLLERS", default="network,node-policy")
@click.option("--resync-seconds", envvar="RESYNC_SECONDS", default=300.0, type=float)
@click.option("--kubeconfig", envvar="KUBECONFIG", default=None, help="in-cluster config when unset")
@click.option(
    "--log-level", envvar="LOG_LEVEL", default="INFO", type=click.Choice(["DEBUG", "INFO", "WARNING"])
)
@click.pass_context
def cli(ctx: click.Context, /, **opts: Any) -> None:
    """SriovNetwork and SriovNetworkNodePolicy.spec.dra to the DRA driver's policy objects."""
    logging.basicConfig(level=opts.pop("log_level"), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = Config(
            namespace=opts["namespace"],
            policy_namespace=opts["policy_namespace"] or opts["namespace"],
            resource_prefix=opts["resource_prefix"],
            controllers=tuple(c for c in opts["controllers"].split(",") if c),
            resync_seconds=opts["resync_seconds"],
            kubeconfig=opts["kubeconfig"],
        )
    except ReasonedError as exc:
        raise click.UsageError(f"{exc.reason}: {exc.message}") from None
    ctx.obj = cfg
    if ctx.invoked_subcommand is not None:
        return
    # The client logs every request body at DEBUG; ours are the interesting lines.
    logging.getLogger("urllib3").setLevel(logging.INFO)
    logging.getLogger("kubernetes").setLevel(logging.INFO)
    stop = _stop_on_signal()
    try:
        run(cfg, stop)
    except ReasonedError as exc:
        click.echo(f"sriov-operator: {exc.reason}: {exc.message}", err=True)
        sys.exit(1)


@cli.command("inspect")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.pass_obj
def inspect_command(cfg: Config, as_json: bool) -> None:
    """Per policy: condition, referenced SriovNetwork, source NAD, generated objects, mapped VFs."""
    try:
        api = api_client(cfg.kubeconfig)
        rows = inspect(OperatorApi(api), cfg.namespace, cfg.policy_namespace)
    except ReasonedError as exc:
        click.echo(f"sriov-operator inspect: {exc.reason}: {exc.message}", err=True)
        sys.exit(1)
    click.echo(json.dumps(rows, indent=2) if as_json else as_text(rows))


@cli.command("node-state")
@click.option("--node-name", envvar="NODE_NAME", required=True, help="the Node this process runs on")
@click.option("--sysfs-root", envvar="SYSFS_ROOT", default="/sys", type=click.Path(path_type=Path))
@click.option("--interval", "interval_s", default=30.0, type=float, help="seconds between sysfs reads")
@click.option("--once", is_flag=True, help="report once and exit (status 1 if it failed)")
@click.pass_obj
def node_state_command(cfg: Config, node_name: str, sysfs_root: Path, interval_s: float, once: bool) -> None:
    """Write this node's SR-IOV inventory (sysfs) as SriovNetworkNodeState/<node>.status."""
    if interval_s <= 0:
        raise click.UsageError("--interval must be positive")
    try:
        ok = run_node_state(cfg, node_name, sysfs_root, interval_s, once=once, stop=_stop_on_signal())
    except ReasonedError as exc:
        click.echo(f"sriov-operator node-state: {exc.reason}: {exc.message}", err=True)
        sys.exit(1)
    sys.exit(0 if ok else 1)


def _stop_on_signal() -> threading.Event:
    stop = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop


def main() -> None:
    cli()
