"""The checkpoint keeps the generation each write replaced; a damaged file is moved aside, never deleted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sriov_dra.core.checkpointrecovery import CURRENT, EMPTY, PREVIOUS
from sriov_dra.core.claimrecord import decode, encode
from sriov_dra.state.checkpoint import GenerationFiles, PreparedClaims, RecoveryLog
from tests.unit.sriov_dra.core.test_claimrecord import claim_record

STAMP = "20261205T003700Z"


def files(tmp_path: Path) -> GenerationFiles:
    return GenerationFiles(tmp_path / "checkpoint.json")


def test_each_write_keeps_the_generation_it_replaced(tmp_path: Path) -> None:
    f = files(tmp_path)
    claims = PreparedClaims(f, records={})
    claims.add_claim(claim_record("c1"))
    assert not f.previous.exists()  # the first write has nothing to keep
    claims.add_claim(claim_record("c2"))
    assert sorted(decode(f.previous.read_bytes())) == ["c1"]
    assert sorted(decode(f.path.read_bytes())) == ["c1", "c2"]
    assert os.stat(f.previous).st_ino != os.stat(f.path).st_ino  # two files, not two names of one
    assert f.leftovers() == []


def test_without_hard_links_the_generation_is_copied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = files(tmp_path)
    f.write(encode({"c1": claim_record("c1")}))

    def no_links(src: object, dst: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    f.write(encode({}))
    assert sorted(decode(f.previous.read_bytes())) == ["c1"] and decode(f.path.read_bytes()) == {}


def test_a_truncated_current_file_is_moved_aside_and_the_previous_generation_used(tmp_path: Path) -> None:
    f = files(tmp_path)
    f.write(encode({"c1": claim_record("c1")}))
    f.write(encode({"c1": claim_record("c1"), "c2": claim_record("c2")}))
    damaged = f.path.read_bytes()[:100]
    f.path.write_bytes(damaged)
    leftover = tmp_path / ".checkpoint.json.tmp.4242"
    leftover.write_bytes(b'{"chec')
    start = f.decide()
    assert start.generation == PREVIOUS and sorted(start.records) == ["c1"]
    assert f.path.read_bytes() == damaged  # deciding moves nothing
    moved = f.quarantine(start, STAMP)
    assert moved == {
        str(leftover): str(tmp_path / f".checkpoint.json.tmp.4242.damaged-{STAMP}".lstrip(".")),
        str(f.path): str(tmp_path / f"checkpoint.json.damaged-{STAMP}"),
    }
    assert (tmp_path / f"checkpoint.json.damaged-{STAMP}").read_bytes() == damaged
    assert not f.path.exists() and not leftover.exists()
    # the next start finds the current file missing beside its previous generation
    assert f.decide().generation == PREVIOUS and f.decide().current_missing


def test_nothing_to_quarantine_moves_nothing(tmp_path: Path) -> None:
    f = files(tmp_path)
    assert f.decide().generation == EMPTY and f.quarantine(f.decide(), STAMP) == {}
    f.write(encode({}))
    assert f.decide().generation == CURRENT and sorted(os.listdir(tmp_path)) == ["checkpoint.json"]


def test_a_missing_directory_has_no_leftovers(tmp_path: Path) -> None:
    assert GenerationFiles(tmp_path / "gone" / "checkpoint.json").leftovers() == []


def test_the_recovery_log_reads_back_what_was_written_and_ignores_garbage(tmp_path: Path) -> None:
    log = RecoveryLog(tmp_path / "checkpoint.json")
    assert log.read() is None
    log.write({"generation": "previous"})
    assert log.path.name == "checkpoint.recovery.json" and log.read() == {"generation": "previous"}
    log.path.write_text("[1]")
    assert log.read() is None
    log.path.write_text("{")
    assert log.read() is None
