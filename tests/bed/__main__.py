"""``python -m tests.bed``: see ``tests.bed.cli``."""

from tests.bed.cli import cli

cli()
