"""The `sriov-dra` admin CLI."""

import click


@click.group()
@click.version_option(package_name="auto-sriov")
def cli() -> None:
    """Inspect and operate automatic SR-IOV networking on a node."""
