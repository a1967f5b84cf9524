"""The `sriov-dra` admin CLI."""

import click

from driver.cli_contract import contract
from driver.cli_render import render


@click.group()
@click.version_option(package_name="auto-sriov")
def cli() -> None:
    """Inspect and operate automatic SR-IOV networking on a node."""


cli.add_command(contract)
cli.add_command(render)
