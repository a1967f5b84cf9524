"""The vector checkers: Python (`sriov-dra contract check`), the generator's freshness, and Go."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sriov_contract import identity
from sriov_dra.cli import cli
from sriov_dra.cli.contract import bundled_fixtures, check_fixtures

FIXTURES = bundled_fixtures()
REPO = FIXTURES.parent


GO_CHECKER = REPO / "tests" / "go" / "contract"
go_checker = pytest.mark.skipif(
    shutil.which("go") is None or not (GO_CHECKER / "go.mod").exists(),
    reason="go or the Go checker is missing",
)


def run_check(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["contract", "check", *args])
    return result.exit_code, result.stdout.splitlines()


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Path:
    root = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, root)
    return root


def test_bundled_vectors_all_pass_with_enough_coverage() -> None:
    code, lines = run_check()
    assert (code, lines) == (0, [])
    report = check_fixtures(FIXTURES)
    assert report.total >= 40
    categories = report.valid + report.invalid
    for required in (
        "unicode",
        "escaped",
        "max-length",
        "node-name-not-label",
        "duplicate-key",
        "wrong-type",
        "unknown-version",
        "hash-format",
        "registry-duplicate",
        "interface-length",
    ):
        assert categories[required] > 0, required


def test_one_changed_byte_of_an_expected_canonical_form_fails(fixture_copy: Path) -> None:
    path = fixture_copy / "v1" / "valid" / "identity-basic.json"
    vector = json.loads(path.read_text())
    hexed = vector["expect"]["canonicalHex"]
    vector["expect"]["canonicalHex"] = hexed.replace("3a", "3b", 1)  # one ':' becomes ';'
    assert vector["expect"]["canonicalHex"] != hexed
    path.write_text(json.dumps(vector))
    code, lines = run_check(str(fixture_copy))
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith("valid/identity-basic.json: expected")


def test_one_changed_byte_in_the_python_canonical_form_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    original = identity.BindingIdentity.canonical_bytes
    monkeypatch.setattr(identity.BindingIdentity, "canonical_bytes", lambda self: original(self)[:-1] + b"\r")
    identity._attachment_id.cache_clear()  # hashes of the real canonical form, from earlier tests
    try:
        report = check_fixtures(FIXTURES)
    finally:
        identity._attachment_id.cache_clear()
    failed = {line.split(":")[0] for line in report.mismatches}
    # Every identity vector and every binding checked against its identity now disagrees.
    assert {"valid/identity-basic.json", "valid/identity-unicode.json", "valid/binding-basic.json"} <= failed


def test_wrong_error_reason_is_reported(fixture_copy: Path) -> None:
    path = fixture_copy / "v1" / "invalid" / "binding-duplicate-key.json"
    vector = json.loads(path.read_text())
    vector["error"] = "UnknownField"
    path.write_text(json.dumps(vector))
    code, lines = run_check(str(fixture_copy))
    assert code == 1
    assert lines == ["invalid/binding-duplicate-key.json: expected error UnknownField, got DuplicateKey"]


def test_a_schema_that_accepts_everything_is_caught(fixture_copy: Path) -> None:
    (fixture_copy / "schema" / "binding.schema.json").write_text(
        '{"$schema": "https://json-schema.org/draft/2020-12/schema"}'
    )
    code, lines = run_check(str(fixture_copy))
    assert code == 1
    assert any("binding schema accepts a document it must reject" in line for line in lines)


def test_empty_or_wrong_directory_is_a_failure(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["contract", "check", str(tmp_path)])
    assert result.exit_code != 0
    assert "MissingFixtures" in result.output
    (tmp_path / "v1" / "valid").mkdir(parents=True)
    shutil.copytree(FIXTURES / "schema", tmp_path / "schema")
    result = CliRunner().invoke(cli, ["contract", "check", str(tmp_path)])
    assert result.exit_code != 0
    assert "NoVectors" in result.output


def test_committed_vectors_match_the_generator() -> None:
    result = subprocess.run(
        [sys.executable, str(FIXTURES / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


@go_checker
def test_go_checker_passes_on_the_bundled_vectors() -> None:
    env = os.environ | {"GOTOOLCHAIN": "local", "GOFLAGS": "-count=1"}
    result = subprocess.run(["go", "test", "./..."], cwd=GO_CHECKER, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


@go_checker
def test_go_checker_fails_on_a_changed_canonical_byte(fixture_copy: Path) -> None:
    path = fixture_copy / "v1" / "valid" / "identity-unicode.json"
    vector = json.loads(path.read_text())
    vector["expect"]["canonicalHex"] = vector["expect"]["canonicalHex"].replace("0a", "0d", 1)
    path.write_text(json.dumps(vector))
    env = os.environ | {"GOTOOLCHAIN": "local", "GOFLAGS": "-count=1", "CONTRACT_FIXTURES": str(fixture_copy)}
    result = subprocess.run(["go", "test", "./..."], cwd=GO_CHECKER, capture_output=True, text=True, env=env)
    assert result.returncode != 0
    assert "identity-unicode.json" in result.stdout


def test_readme_counts_and_worked_example_match_the_vectors() -> None:
    readme = (FIXTURES / "README.md").read_text()
    report = check_fixtures(FIXTURES)
    rows = {}
    for line in readme.split("### Counts", 1)[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[1].isdigit():
            rows[cells[0].split(" (")[0]] = (int(cells[1]), int(cells[2]))
    assert rows == {c: (report.valid[c], report.invalid[c]) for c in report.valid + report.invalid}
    basic = json.loads((FIXTURES / "v1" / "valid" / "identity-basic.json").read_text())
    canonical = bytes.fromhex(basic["expect"]["canonicalHex"]).decode()
    assert f"```\n{canonical}```" in readme
    assert basic["expect"]["attachmentID"] in readme and basic["expect"]["shadowName"] in readme


def test_broken_vector_files_and_schemas_are_reported_not_raised(fixture_copy: Path) -> None:
    (fixture_copy / "v1" / "valid" / "zz-broken.json").write_text('{"kind": "binding",')
    code, lines = run_check(str(fixture_copy))
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith("valid/zz-broken.json: unreadable vector")
    (fixture_copy / "schema" / "registry.schema.json").write_text('{"type": 7}')
    result = CliRunner().invoke(cli, ["contract", "check", str(fixture_copy)])
    assert result.exit_code == 1
    assert "InvalidSchema" in result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not an escaped exception
