"""What the admin commands share: connecting, reading the node's checkpoint, and printing.

Every command prints a human table by default and JSON with `-o json`; every refusal is one
`sriov-dra: Reason: message` line on stderr with a non-zero exit, never a traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.model import DRIVER_NAME

if TYPE_CHECKING:
    from kubernetes import client

    from sriov_dra.core.claimrecord import ClaimRecord

DEFAULT_CHECKPOINT = Path("/var/lib/kubelet/plugins") / DRIVER_NAME / "checkpoint.json"
_F = TypeVar("_F", bound=Callable[..., Any])


def output_option(fn: _F) -> _F:
    return click.option(
        "-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True
    )(fn)


def kube_options(fn: _F) -> _F:
    fn = click.option("--kubeconfig", envvar="KUBECONFIG", default=None, help="in-cluster config when unset")(
        fn
    )
    return fn


def checkpoint_option(help_text: str) -> Callable[[_F], _F]:
    return click.option(
        "--checkpoint",
        envvar="SRIOV_DRA_CHECKPOINT",
        type=click.Path(path_type=Path),
        default=DEFAULT_CHECKPOINT,
        show_default=True,
        help=help_text,
    )


def node_options(fn: _F) -> _F:
    fn = checkpoint_option("the node agent's checkpoint (read only)")(fn)
    fn = click.option("--node", envvar="NODE_NAME", required=True, help="the node to inspect")(fn)
    return kube_options(fn)


def reasoned(fn: _F) -> _F:
    """A command body whose ReasonedError becomes one line and exit status 2."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ReasonedError as err:
            click.echo(f"sriov-dra: {err.reason}: {err.message}", err=True)
            sys.exit(2)

    return run  # type: ignore[return-value]


def api_client(kubeconfig: str | None) -> client.ApiClient:
    from kubernetes import client  # noqa: PLC0415 - keeps --help instant
    from kubernetes import config as kube_config  # noqa: PLC0415

    try:
        if kubeconfig:
            made: client.ApiClient = kube_config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
            return made
        kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise ReasonedError(
            reasons.NO_CLUSTER_ACCESS,
            f"cannot load cluster credentials ({exc}); pass --kubeconfig or set KUBECONFIG",
        ) from exc
    return client.ApiClient()


def read_checkpoint(path: Path) -> list[ClaimRecord]:
    """The node's prepared claims, read without ever writing; a missing file means none."""
    from sriov_dra.core.claimrecord import decode  # noqa: PLC0415

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ReasonedError(
            reasons.CHECKPOINT_UNREADABLE,
            f"cannot read {path} ({exc}); run on the node as root or pass --checkpoint",
        ) from exc
    return list(decode(raw, str(path)).values())


def node_uid(api: client.ApiClient, node: str) -> str:
    from kubernetes import client  # noqa: PLC0415
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415

    try:
        md = client.CoreV1Api(api).read_node(node).metadata
    except ApiException as exc:
        raise ReasonedError(
            reasons.NODE_UNREADABLE, f"cannot read Node {node}: HTTP {exc.status} {exc.reason}"
        ) from exc
    if md is None or not md.uid:
        raise ReasonedError(reasons.NODE_UNREADABLE, f"Node {node} came back without a UID")
    return str(md.uid)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) if c not in (None, "") else "-" for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in cells
    )


def emit_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=True))
