"""The `sriov-dra` admin CLI: one module per subcommand, each holding the click command of its name."""

import click

from sriov_dra.cli import contract, inspect, orphans, preflight, render, uninstall


@click.group()
@click.version_option(package_name="auto-sriov")
def cli() -> None:
    """Inspect and operate automatic SR-IOV networking on a node."""


cli.add_command(contract.contract)
cli.add_command(render.render)
cli.add_command(inspect.inspect)
cli.add_command(orphans.orphans)
cli.add_command(preflight.preflight)
cli.add_command(uninstall.uninstall_check)
