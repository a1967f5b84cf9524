"""`sriov-dra orphans`: this node's managed shadows against its checkpoint (spec 8.5, 18.3: an
orphan is reported, and only an operator finalizes it).

A dry run by default. `--finalize ID` takes one orphan's full attachment ID and removes only our
finalizer from exactly that object; foreign finalizers are listed separately and never touched.
"""

from __future__ import annotations

import functools
from pathlib import Path

import click

from sriov_dra.cli.common import (
    api_client,
    emit_json,
    node_options,
    node_uid,
    output_option,
    read_checkpoint,
    reasoned,
    table,
)
from sriov_dra.recovery.orphans import ShadowReport, finalize_orphan, scan


def render_scan(reports: list[ShadowReport]) -> str:
    rows = [
        (
            r.namespace,
            r.name,
            r.status,
            "yes" if r.protected else "no",
            "yes" if r.deleting else "no",
            r.attachment_id,
        )
        for r in reports
    ]
    out = table(("NAMESPACE", "SHADOW", "STATUS", "PROTECTED", "DELETING", "ATTACHMENT-ID"), rows)
    foreign = [r for r in reports if r.foreign_finalizers]
    if foreign:
        out += "\nforeign finalizers (not ours; never removed by sriov-dra):\n"
        out += table(
            ("NAMESPACE", "SHADOW", "FINALIZERS"),
            [(r.namespace, r.name, ",".join(r.foreign_finalizers)) for r in foreign],
        )
    details = [r for r in reports if r.detail]
    for r in details:
        out += f"{r.namespace}/{r.name}: {r.status}: {r.detail}\n"
    n = sum(r.orphan for r in reports)
    out += f"\n{n} orphan(s) of {len(reports)} shadow(s); dry run, nothing changed"
    if n:
        out += " (finalize one with --finalize <ATTACHMENT-ID> after fencing its workload)"
    return out + "\n"


@click.command("orphans")
@node_options
@output_option
@click.option("--finalize", "finalize_id", default=None, metavar="ATTACHMENT-ID", help="finalize this orphan")
@reasoned
def orphans(
    kubeconfig: str | None, node: str, checkpoint: Path, output: str, finalize_id: str | None
) -> None:
    """List this node's managed shadows and report those no checkpoint record accounts for."""
    from sriov_dra.kube.resources import KubeNads, KubeShadowLister  # noqa: PLC0415 - keeps --help instant

    api = api_client(kubeconfig)
    uid = node_uid(api, node)
    # Read by the scan once the API server has taken its listing's snapshot (see sriov_dra.recovery.orphans).
    records = functools.partial(read_checkpoint, checkpoint)
    lister = KubeShadowLister(api)
    if finalize_id:
        done = finalize_orphan(lister, KubeNads(api), records, uid, finalize_id)
        if output == "json":
            emit_json({"finalized": done.to_json()})
        else:
            kept = ", ".join(done.foreign_finalizers) or "none"
            click.echo(
                f"finalized {done.namespace}/{done.name} (UID {done.uid}); foreign finalizers kept: {kept}"
            )
        return
    reports = scan(lister, records, uid)
    if output == "json":
        emit_json(
            {
                "node": node,
                "nodeUID": uid,
                "dryRun": True,
                "shadows": [r.to_json() for r in reports],
                "orphans": [r.attachment_id or f"{r.namespace}/{r.name}" for r in reports if r.orphan],
                "foreignFinalizers": [
                    {"namespace": r.namespace, "name": r.name, "finalizers": list(r.foreign_finalizers)}
                    for r in reports
                    if r.foreign_finalizers
                ],
            }
        )
    else:
        click.echo(render_scan(reports), nl=False)
