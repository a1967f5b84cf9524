"""Which checkpoint generation a start uses, what it moves aside and what the administrator is told."""

from __future__ import annotations

import pytest

from sriov_dra.core.checkpointrecovery import (
    CURRENT,
    EMPTY,
    MISSING,
    PREVIOUS,
    UNFINISHED_WRITE,
    Damaged,
    NotRebuilt,
    Recovery,
    StartingPoint,
    quarantine_name,
    starting_point,
)
from sriov_dra.core.claimrecord import CheckpointError, encode
from tests.unit.sriov_dra.core.test_claimrecord import claim_record, sealed

CUR, PREV = "/p/checkpoint.json", "/p/checkpoint.prev.json"
NEW = encode({"c1": claim_record("c1"), "c2": claim_record("c2")})
OLD = encode({"c1": claim_record("c1")})


def truncated(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def bit_flipped(raw: bytes) -> bytes:
    at = raw.index(b"claim-c1") + 2
    return raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1 :]


def start(current: bytes | None, previous: bytes | None, leftovers: tuple[str, ...] = ()) -> StartingPoint:
    return starting_point(current, previous, current_path=CUR, previous_path=PREV, leftovers=leftovers)


def test_a_sound_current_file_is_used_and_nothing_is_recovered() -> None:
    got = start(NEW, b"garbage")  # the previous generation is not even read
    assert (got.generation, sorted(got.records), got.damaged, got.recovered) == (
        CURRENT,
        ["c1", "c2"],
        (),
        False,
    )


def test_a_first_start_is_empty_and_not_a_recovery() -> None:
    assert (start(None, None).generation, start(None, None).recovered) == (EMPTY, False)


@pytest.mark.parametrize("damage", [truncated, bit_flipped, lambda raw: b"", lambda raw: raw + b"{"])
def test_a_damaged_current_file_starts_from_the_previous_generation(damage) -> None:
    got = start(damage(NEW), OLD)
    assert (got.generation, sorted(got.records), got.recovered) == (PREVIOUS, ["c1"], True)
    assert [d.file for d in got.damaged] == [CUR] and got.damaged[0].why
    assert not got.current_missing


def test_both_generations_damaged_or_the_previous_missing_start_empty() -> None:
    both = start(truncated(NEW), bit_flipped(OLD))
    assert (both.generation, both.records, [d.file for d in both.damaged]) == (EMPTY, {}, [CUR, PREV])
    alone = start(truncated(NEW), None)
    assert (alone.generation, [d.file for d in alone.damaged], alone.recovered) == (EMPTY, [CUR], True)


def test_a_missing_current_file_beside_a_previous_one_is_a_recovery() -> None:
    got = start(None, OLD)
    assert (got.generation, sorted(got.records), got.current_missing, got.recovered) == (
        PREVIOUS,
        ["c1"],
        True,
        True,
    )
    worse = start(None, truncated(OLD))
    assert (worse.generation, worse.current_missing, [d.file for d in worse.damaged]) == (EMPTY, True, [PREV])


def test_unfinished_temp_files_are_moved_aside_never_read() -> None:
    got = start(NEW, None, ("/p/.checkpoint.json.tmp.7",))
    assert got.generation == CURRENT and got.recovered
    assert got.damaged == (Damaged("/p/.checkpoint.json.tmp.7", UNFINISHED_WRITE),)


def test_an_unknown_version_is_not_damage_and_still_stops_the_start() -> None:
    with pytest.raises(CheckpointError) as err:
        start(sealed({"claims": {}}, version=2), OLD)
    assert err.value.reason == "UnknownCheckpointVersion"


def test_quarantine_names_never_collide() -> None:
    assert (
        quarantine_name("checkpoint.json", "20261205T003700Z", set())
        == "checkpoint.json.damaged-20261205T003700Z"
    )
    taken = {"checkpoint.json.damaged-S", "checkpoint.json.damaged-S-1"}
    assert quarantine_name("checkpoint.json", "S", taken) == "checkpoint.json.damaged-S-2"


def test_the_recovery_names_files_generation_rebuilds_and_what_to_do() -> None:
    got = start(truncated(NEW), OLD, ("/p/.checkpoint.json.tmp.7",))
    recovery = Recovery(
        time="2026-12-05T00:37:00Z",
        node="node-a",
        start=got,
        moved={CUR: CUR + ".damaged-S"},
        rebuilt=("c2",),
    )
    message = recovery.message()
    assert f"{CUR} (" in message and f"moved to {CUR}.damaged-S" in message
    assert "/p/.checkpoint.json.tmp.7 (an unfinished write" in message
    assert "previous generation (1 claims)" in message and "rebuilt 1 claims" in message
    assert "nothing else to do" in message
    doc = recovery.to_json()
    assert doc["reason"] == "CheckpointRecovered" and doc["generation"] == PREVIOUS
    assert doc["quarantined"][1] == {"file": CUR, "movedTo": CUR + ".damaged-S", "why": got.damaged[1].why}
    assert doc["quarantined"][0]["movedTo"] == "" and doc["rebuiltClaims"] == ["c2"]
    assert doc["notRebuilt"] == [] and doc["currentMissing"] is False


def test_shadows_not_rebuilt_tell_the_administrator_how_to_release_them() -> None:
    recovery = Recovery(
        time="t",
        node="node-a",
        start=start(None, OLD),
        moved={},
        not_rebuilt=(NotRebuilt("ns", "dra-sriov-x", "its ResourceClaim c9 is gone"),),
    )
    message = recovery.message()
    assert MISSING in message and "rebuilt" not in message.split("could not")[0]
    assert "sriov-dra inspect node --node node-a" in message and "sriov-dra orphans" in message
    assert recovery.to_json()["notRebuilt"] == [
        {"namespace": "ns", "name": "dra-sriov-x", "why": "its ResourceClaim c9 is gone"}
    ]
