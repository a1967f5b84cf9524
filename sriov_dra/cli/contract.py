"""`sriov-dra contract check [DIR]`: verify the version-1 contract vectors in Python.

The checker lives with the command that runs it, not in sriov_contract: it imports jsonschema,
and the contract package stays standard-library only because the CNI executable imports it.
Layout of a fixtures directory (fixtures/README.md): schema/<kind>.schema.json and
v1/{valid,invalid}/*.json, one vector per file.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import click
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from sriov_contract import reasons
from sriov_contract.binding import parse_binding
from sriov_contract.deviceinfo import parse_device_info
from sriov_contract.errors import ContractError, ReasonedError
from sriov_contract.identity import config_sha256, parse_identity, shadow_name_for
from sriov_contract.keys import label_value
from sriov_contract.registry import parse_registry
from sriov_contract.selection import parse_selection

SCHEMA_KINDS: Final = ("identity", "binding", "registry", "selection")
# Documents added to version 1 later: a fixtures directory from before them has no schema for them,
# and only a vector of that kind needs one.
ADDED_SCHEMA_KINDS: Final = ("deviceInfo",)
VECTOR_FIELDS: Final = frozenset(
    {"description", "category", "kind", "document", "identity", "config", "expect", "error", "schemaRejects"}
)


def bundled_fixtures() -> Path:
    """The fixtures directory of this source tree (an editable install or a checkout)."""
    return Path(__file__).resolve().parents[2] / "fixtures"


def _identity_outcome(text: str) -> dict[str, str]:
    ident = parse_identity(text)
    return {
        "canonicalHex": ident.canonical_bytes().hex(),
        "attachmentID": ident.attachment_id(),
        "shadowName": ident.shadow_name(),
    }


def _binding_outcome(text: str, vector: dict[str, Any]) -> dict[str, str]:
    binding = parse_binding(text)
    if "identity" in vector:
        binding.verify_identity(parse_identity(json.dumps(vector["identity"])))
    if "config" in vector:
        binding.verify_config(vector["config"].encode("utf-8"))
    return {"canonical": binding.to_json(), "shadowName": shadow_name_for(binding.attachment_id)}


_OUTCOMES: Final[dict[str, Callable[[str, dict[str, Any]], dict[str, str]]]] = {
    "identity": lambda text, _: _identity_outcome(text),
    "config": lambda text, _: {"configSHA256": config_sha256(text.encode("utf-8"))},
    "binding": _binding_outcome,
    "registry": lambda text, _: {"canonical": parse_registry(text).to_json()},
    "selection": lambda text, _: {"canonical": parse_selection(text).to_json()},
    "deviceInfo": lambda text, _: {"canonical": parse_device_info(text).to_json()},
    "labelValue": lambda text, _: {"value": label_value(text)},
}


@dataclass
class Report:
    """What a check found: one line per mismatch, and how many vectors of each category passed through."""

    mismatches: list[str] = field(default_factory=list)
    valid: Counter[str] = field(default_factory=Counter)
    invalid: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.valid.values()) + sum(self.invalid.values())


def _load_schemas(root: Path) -> dict[str, Draft202012Validator]:
    validators = {}
    added = [k for k in ADDED_SCHEMA_KINDS if (root / "schema" / f"{k}.schema.json").exists()]
    for kind in (*SCHEMA_KINDS, *added):
        path = root / "schema" / f"{kind}.schema.json"
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
            Draft202012Validator.check_schema(schema)
        except (OSError, ValueError, SchemaError) as exc:
            raise ContractError(
                reasons.INVALID_SCHEMA,
                f"{path} is not a readable draft 2020-12 JSON Schema: {exc}",
                path=str(path),
            ) from exc
        validators[kind] = Draft202012Validator(schema)
    return validators


def _schema_rejects(validator: Draft202012Validator, text: str) -> bool | None:
    """None when the document is not JSON at all, so no schema can judge it."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return not validator.is_valid(doc)


def _check_vector(
    name: str, vector: dict[str, Any], expect_valid: bool, schemas: dict[str, Draft202012Validator]
) -> list[str]:
    unknown = set(vector) - VECTOR_FIELDS
    kind = vector.get("kind")
    if unknown or kind not in _OUTCOMES or not isinstance(vector.get("document"), str):
        return [f"{name}: malformed vector (kind {kind!r}, unknown fields {sorted(unknown)})"]
    if expect_valid != ("expect" in vector) or expect_valid == ("error" in vector):
        return [f"{name}: a valid vector needs 'expect', an invalid one 'error', never both"]
    text: str = vector["document"]
    try:
        outcome: dict[str, str] | None = _OUTCOMES[kind](text, vector)
        reason = None
    except ContractError as exc:
        outcome, reason = None, exc.reason
    problems = []
    if expect_valid and outcome != vector["expect"]:
        problems.append(f"{name}: expected {vector['expect']}, got {outcome if reason is None else reason}")
    if not expect_valid and reason != vector["error"]:
        problems.append(f"{name}: expected error {vector['error']}, got {reason or outcome}")
    if kind in ADDED_SCHEMA_KINDS and kind not in schemas:
        problems.append(f"{name}: no schema/{kind}.schema.json for a {kind} vector")
    if kind in schemas:
        rejected = _schema_rejects(schemas[kind], text)
        if expect_valid and rejected is not False:
            problems.append(f"{name}: the {kind} schema rejects a valid document")
        if vector.get("schemaRejects") and rejected is not True:
            problems.append(f"{name}: the {kind} schema accepts a document it must reject")
    return problems


def check_fixtures(root: Path) -> Report:
    """Check every vector under `root`; raise ContractError when there is nothing to check."""
    schema_dir = root / "schema"
    if not schema_dir.is_dir() or not (root / "v1").is_dir():
        raise ContractError(
            reasons.MISSING_FIXTURES,
            f"{root} has no schema/ and v1/ directories; pass the fixtures directory of a checkout",
            path=str(root),
        )
    schemas = _load_schemas(root)
    report = Report()
    for sub, expect_valid, counts in (("valid", True, report.valid), ("invalid", False, report.invalid)):
        for path in sorted((root / "v1" / sub).glob("*.json")):
            name = f"{sub}/{path.name}"
            try:
                vector = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, OSError) as exc:
                report.mismatches.append(f"{name}: unreadable vector: {exc}")
                continue
            if not isinstance(vector, dict):
                report.mismatches.append(f"{name}: a vector is a JSON object")
                continue
            report.mismatches += _check_vector(name, vector, expect_valid, schemas)
            counts[str(vector.get("category", "?"))] += 1
    if report.total == 0:
        raise ContractError(
            reasons.NO_VECTORS, f"{root}/v1 holds no vectors; a check of nothing is not a pass"
        )
    return report


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
