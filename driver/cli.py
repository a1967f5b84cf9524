"""The `sriov-dra` admin CLI."""

import click

from driver.cli_contract import contract
from driver.cli_inspect import inspect
from driver.cli_orphans import orphans
from driver.cli_preflight import preflight
from driver.cli_render import render


@click.group()
@click.version_option(package_name="auto-sriov")
def cli() -> None:
    """Inspect and operate automatic SR-IOV networking on a node."""


cli.add_command(contract)
cli.add_command(render)
cli.add_command(inspect)
cli.add_command(orphans)
cli.add_command(preflight)
