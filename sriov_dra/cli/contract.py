"""`sriov-dra contract check [DIR]`: verify the version-1 contract vectors in Python."""

from __future__ import annotations

from pathlib import Path

import click

from sriov_contract.conformance import bundled_fixtures, check_fixtures
from sriov_contract.errors import ReasonedError


@click.group("contract")
def contract() -> None:
    """The cross-repository binding/registry contract."""


@contract.command("check")
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
def check(directory: Path | None) -> None:
    """Check every vector in DIRECTORY (default: the bundled fixtures/).

    Prints one line per mismatch and exits non-zero if there is any.
    """
    root = directory or bundled_fixtures()
    try:
        report = check_fixtures(root)
    except ReasonedError as exc:
        raise click.ClickException(f"{exc.reason}: {exc.message}") from exc
    for line in report.mismatches:
        click.echo(line)
    categories = ", ".join(f"{k} {v}" for k, v in sorted((report.valid + report.invalid).items()))
    click.echo(
        f"{report.total} vectors ({sum(report.valid.values())} valid, {sum(report.invalid.values())} invalid; "
        f"{categories}): {len(report.mismatches)} mismatches",
        err=True,
    )
    if report.mismatches:
        raise click.exceptions.Exit(1)
