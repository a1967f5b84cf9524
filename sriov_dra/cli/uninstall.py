"""`sriov-dra uninstall-check`: whether the driver may be removed now (spec 18.1), and if not, what
blocks it. Read only: the Helm chart's pre-delete hook runs it, so `helm uninstall` refuses while
managed workloads exist; on a node it also reads that node's checkpoint.

Exit 0 when nothing blocks; otherwise the blockers are printed and the command exits 2 with
UninstallBlocked.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.cli.common import (
    api_client,
    checkpoint_option,
    emit_json,
    kube_options,
    output_option,
    read_checkpoint,
    reasoned,
    table,
)
from sriov_dra.core.uninstall import Blocker, checkpoint_blockers, claim_blockers, nad_blockers, summary

if TYPE_CHECKING:
    from collections.abc import Iterator

    from kubernetes import client

NADS = "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
NOT_FOUND = 404


def _listed(api: client.ApiClient, path: str, what: str) -> Iterator[dict[str, Any]]:
    """Every object at `path`, cluster-wide; none when the API is not served (its CRD is gone)."""
    from sriov_dra.apierrors import ApiError  # noqa: PLC0415 - keeps --help instant
    from sriov_dra.kube.transport import list_streamed  # noqa: PLC0415

    try:
        yield from list_streamed(api, path, what, [])
    except ApiError as exc:
        if exc.status != NOT_FOUND:
            raise


def blockers(api: client.ApiClient | None, checkpoint: Path | None) -> list[Blocker]:
    found = []
    if api is not None:
        found += nad_blockers(_listed(api, NADS, "NetworkAttachmentDefinitions"))
        found += claim_blockers(_listed(api, CLAIMS, "ResourceClaims"))
    if checkpoint is not None:
        found += checkpoint_blockers(read_checkpoint(checkpoint))
    return found


def render(found: list[Blocker], checkpoint: Path | None, checkpoint_arg: Path) -> str:
    where = (
        f"checkpoint {checkpoint} read" if checkpoint else f"no checkpoint at {checkpoint_arg} (not a node's)"
    )
    if not found:
        return f"nothing blocks uninstall: no managed shadow, finalizer, allocated claim or record; {where}\n"
    rows = [(b.kind, b.namespace, b.name, b.uid, b.why) for b in found]
    return table(("KIND", "NAMESPACE", "NAME", "UID", "WHY"), rows) + f"\n{where}\n"


@click.command("uninstall-check")
@kube_options
@checkpoint_option("a node's checkpoint, read when it exists (run on each node before removing)")
@click.option(
    "--node-only",
    is_flag=True,
    help="read only the checkpoint, no cluster (on a node without credentials, e.g. kubectl debug node)",
)
@output_option
@reasoned
def uninstall_check(kubeconfig: str | None, checkpoint: Path, node_only: bool, output: str) -> None:
    """Say what would be stranded by removing the driver now; exit 2 while anything is."""
    api = None if node_only else api_client(kubeconfig)
    present = checkpoint if checkpoint.exists() else None
    found = blockers(api, present)
    if output == "json":
        emit_json(
            {
                "clear": not found,
                "checkpoint": str(present) if present else None,
                "blockers": [b.to_json() for b in found],
            }
        )
    else:
        click.echo(render(found, present, checkpoint), nl=False)
    if found:
        raise ReasonedError(
            reasons.UNINSTALL_BLOCKED,
            f"{summary(found)} remain: delete the workloads that use the driver's claims, let the "
            "driver release them, then check again (docs/deploying.md, Uninstall)",
        )
