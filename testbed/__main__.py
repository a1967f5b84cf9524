"""``python -m testbed``: see ``testbed.cli``."""

from testbed.cli import cli

cli()
