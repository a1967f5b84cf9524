"""`sriov-dra render`: check a NAD template offline by rendering it exactly as prepare would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import yaml

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons
from sriov_dra.core.shadowconfig import RenderedConfig, render_shadow_config


def _load_manifest(path: Path) -> dict[str, Any]:
    try:
        # YAML is a superset of JSON, so one loader reads both manifest forms.
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ReasonedError(
            reasons.INVALID_MANIFEST, f"cannot read NAD manifest {path}: {exc}; pass a YAML or JSON file"
        ) from exc
    if not isinstance(doc, dict):
        raise ReasonedError(
            reasons.INVALID_MANIFEST, f"{path} does not hold one NetworkAttachmentDefinition object"
        )
    return doc


def _human(rendered: RenderedConfig) -> str:
    return (
        f"{rendered.config.decode()}\n"
        f"configSHA256: {rendered.sha256}\n"
        f"cniName: {rendered.cni_name}\n"
        f"pciAddress: {rendered.pci_address}\n"
    )


def _as_json(rendered: RenderedConfig, pod_namespace: str | None) -> str:
    out: dict[str, Any] = {
        "config": rendered.config.decode(),
        "configSHA256": rendered.sha256,
        "cniName": rendered.cni_name,
        "pluginIndex": rendered.plugin_index,
        "pluginType": rendered.plugin_type,
        "pciAddress": rendered.pci_address,
    }
    if pod_namespace is not None:
        out["podNamespace"] = pod_namespace
    return json.dumps(out, indent=2) + "\n"


@click.command()
@click.option(
    "--nad",
    "nad_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="NAD manifest (YAML or JSON).",
)
@click.option("--pci", required=True, help="Allocated VF PCI address, e.g. 0000:03:00.1.")
@click.option(
    "--pod-namespace", default=None, help="Namespace of the consuming Pod (the shadow's namespace)."
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def render(nad_file: Path, pci: str, pod_namespace: str | None, output: str) -> None:
    """Render NAD template FILE for one VF and print the exact shadow configuration bytes."""
    try:
        source = _load_manifest(nad_file)
        metadata = source.get("metadata")
        if pod_namespace is not None and isinstance(metadata, dict):
            # A manifest without a namespace is applied into the Pod's; name-only references mean that too.
            metadata.setdefault("namespace", pod_namespace)
        rendered = render_shadow_config(source, pci)
    except ReasonedError as err:
        click.echo(f"error: {err.reason}: {err.message}", err=True)
        if output == "json":
            click.echo(json.dumps({"reason": err.reason, "message": err.message}))
        raise SystemExit(1) from None
    click.echo(_as_json(rendered, pod_namespace) if output == "json" else _human(rendered), nl=False)
