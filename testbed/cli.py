"""``scripts/testbed up|down|status|clean``: the bed as a long-lived local cluster.

``up`` prints shell-sourceable ``export`` lines on stdout (progress goes to stderr), so
``eval "$(scripts/testbed up)"`` points kubectl-style tools and a pytest session at it: with
``TESTBED_STATE`` set, the ``testbed`` fixture attaches to this bed instead of starting its own.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from sriov_contract.errors import ReasonedError
from testbed import controlplane, runstate
from testbed.bed import TestBed
from testbed.processes import is_running, log_tail
from testbed.tools import ToolSet

CLI_RUN_ID = "cli"


def _state_file(root: Path) -> Path:
    return root / CLI_RUN_ID / runstate.STATE_FILE


def env_lines(bed: TestBed) -> list[str]:
    values = {
        "KUBECONFIG": str(bed.kubeconfig),
        "AUDIT_LOG": str(bed.state.audit_log),
        "TESTBED_LOG_DIR": str(bed.log_dir),
        "TESTBED_STATE": str(bed.state_file),
        "TESTBED_SERVER": bed.server,
        "TESTBED_CA_FILE": str(bed.ca_file),
        "TESTBED_NODE_NAME": bed.node_name,
        "TESTBED_NODE_UID": bed.node_uid,
    }
    for identity, path in sorted(bed.state.kubeconfigs.items()):
        key = "TESTBED_KUBECONFIG_" + identity.upper().replace("-", "_")
        values[key] = path
    return [f"export {k}={shlex.quote(v)}" for k, v in values.items()]


def _existing(root: Path) -> TestBed | None:
    path = _state_file(root)
    if not path.is_file():
        return None
    return TestBed.attach(path)


@click.group()
@click.option(
    "--root",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory for run state and logs (default $AUTO_SRIOV_TESTBED_ROOT or /tmp/auto-sriov-testbed).",
)
@click.pass_context
def cli(ctx: click.Context, root: Path | None) -> None:
    """Run the local Kubernetes test bed (etcd, kube-apiserver, controller-manager, scheduler)."""
    ctx.obj = root or runstate.default_root()


@cli.command()
@click.option(
    "--node-name",
    default=None,
    help="Name of the simulated Node (default $TESTBED_NODE_NAME or sriov-node-0).",
)
@click.pass_obj
def up(root: Path, node_name: str | None) -> None:
    """Start the bed, or report the one already running; prints export lines."""
    bed = _existing(root)
    if bed is not None:
        if bed.healthy():
            click.echo(f"test bed already up: {bed.server} (logs in {bed.log_dir})", err=True)
            click.echo("\n".join(env_lines(bed)))
            return
        if runstate.owner_alive(bed.state):
            raise click.ClickException(
                f"another process (pid {bed.state.owner_pid}) is starting the test bed; wait for it or run 'down'"
            )
        click.echo("removing an unhealthy earlier test bed", err=True)
        for rec in bed.state.processes:
            if not is_running(rec.pid, rec.start_ticks):
                click.echo(
                    f"  {rec.name} (pid {rec.pid}) had died; its log ended:\n{log_tail(Path(rec.log), 8)}",
                    err=True,
                )
        runstate.dispose(bed.state, keep_logs=False)
    click.echo(
        "starting the test bed (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)...", err=True
    )
    try:
        bed = controlplane.start(
            tools=ToolSet(), run_id=CLI_RUN_ID, node_name=node_name, root=root, detached=True
        )
    except ReasonedError as exc:
        raise click.ClickException(f"{exc.reason}: {exc.message}") from None
    click.echo(
        f"test bed up in {bed.state.timings.get('apiserver_ready_s', 0):.1f}s (apiserver /readyz): {bed.server}",
        err=True,
    )
    click.echo("\n".join(env_lines(bed)))


@cli.command()
@click.option("--keep-logs", is_flag=True, help="Keep the run directory (logs, audit log, kubeconfigs).")
@click.pass_obj
def down(root: Path, keep_logs: bool) -> None:
    """Stop the bed started by 'up' (a no-op when none runs)."""
    bed = _existing(root)
    if bed is None or bed.state.stopped:
        click.echo("no test bed running", err=True)
        return
    bed.stop(keep_logs=keep_logs)
    where = f"; logs kept in {bed.log_dir}" if keep_logs else ""
    click.echo(f"test bed stopped{where}", err=True)


@cli.command()
@click.pass_obj
def status(root: Path) -> None:
    """Describe the bed started by 'up' and every other run; exit 0 only if 'up''s bed is healthy."""
    bed = _existing(root)
    healthy = bed is not None and not bed.state.stopped and bed.healthy()
    if bed is None or bed.state.stopped:
        click.echo("test bed: not running")
    else:
        st = bed.state
        click.echo(f"test bed: {'healthy' if healthy else 'UNHEALTHY'}")
        click.echo(f"  server:     {st.server}")
        click.echo(f"  node:       {st.node_name} (uid {st.node_uid})")
        click.echo(f"  versions:   {', '.join(f'{k} {v}' for k, v in sorted(st.versions.items()))}")
        click.echo(f"  run dir:    {st.run_dir}")
        peaks = bed.peak_rss_kib()
        for rec in st.processes:
            alive = f"running, peak RSS {peaks[rec.name] // 1024} MiB" if rec.name in peaks else "DEAD"
            click.echo(f"  {rec.name:<24} pid {rec.pid:<8} {alive}  log {rec.log}")
    others = [s for s in runstate.runs(root) if s.run_id != CLI_RUN_ID]
    for s in others:
        kind = (
            "logs kept"
            if s.stopped
            else "stale"
            if runstate.is_stale(s)
            else f"live (owner pid {s.owner_pid})"
        )
        click.echo(f"other run {s.run_id}: {kind}, {s.run_dir}")
    sys.exit(0 if healthy else 3)


@cli.command()
@click.option("--kept-logs", is_flag=True, help="Also delete stopped runs whose logs were kept.")
@click.pass_obj
def clean(root: Path, kept_logs: bool) -> None:
    """Stop and delete runs left behind by crashed sessions (never a live one)."""
    removed = runstate.cleanup_stale(root)
    if kept_logs:
        for state in runstate.runs(root):
            if state.stopped:
                runstate.dispose(state, keep_logs=False)
                removed.append(state.run_id)
    click.echo(f"removed {len(removed)} stale run(s){': ' + ', '.join(removed) if removed else ''}", err=True)
