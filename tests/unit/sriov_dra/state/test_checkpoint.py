"""Checkpoint: atomic, verified, versioned, narrow mutations with rollback, claim-UID uniqueness."""

import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from sriov_dra.core.claimrecord import CheckpointError, ClaimRecord, PreparedDevice, decode, encode
from sriov_dra.state.checkpoint import FileStorage, PreparedClaims, _copied
from tests.support.checkpoint import managed_binding, prepared_claim
from tests.unit.sriov_dra.core.test_claimrecord import claim_record, prepared_device


class FailingStorage:
    def __init__(self) -> None:
        self.data: bytes | None = None
        self.fail = False

    def read(self) -> bytes | None:
        return self.data

    def write(self, data: bytes) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")
        self.data = data


def test_round_trip_through_file_survives_restart(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    store = PreparedClaims(FileStorage(path))
    store.add_claim(claim_record("c1", "p1"))
    store.add_claim(claim_record("c2", "p1", (prepared_device("0000-03-00-2"),)))
    reopened = PreparedClaims(FileStorage(path))
    assert reopened.snapshot_claim("c1") == claim_record("c1", "p1")
    assert sorted(r.claim_uid for r in reopened.snapshot_pod("p1")) == ["c1", "c2"]
    assert reopened.snapshot_pod("other") == []
    # no temp file is left behind and the file carries a version and a checksum
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.json"]
    doc = json.loads(path.read_bytes())
    assert doc["version"] == 1 and len(doc["checksum"]) == 64


def test_missing_file_is_an_empty_checkpoint(tmp_path: Path) -> None:
    assert PreparedClaims(FileStorage(tmp_path / "none.json")).snapshot_all() == []


def test_claim_uid_is_unique_even_for_another_pod() -> None:
    store = PreparedClaims(FailingStorage())
    store.add_claim(claim_record("c1", "p1"))
    with pytest.raises(CheckpointError) as err:
        store.add_claim(claim_record("c1", "p2"))
    assert err.value.reason == "ClaimReleaseInProgress"
    assert prepared_claim(store, "c1").pod_uid == "p1"


def test_write_failure_rolls_back_memory() -> None:
    storage = FailingStorage()
    store = PreparedClaims(storage)
    store.add_claim(claim_record("c1"))
    persisted = storage.data
    storage.fail = True
    with pytest.raises(CheckpointError) as err:
        store.add_claim(claim_record("c2"))
    assert err.value.reason == "CheckpointWriteFailed"
    assert store.snapshot_claim("c2") is None
    with pytest.raises(CheckpointError):
        store.remove_claim("c1")
    assert store.snapshot_claim("c1") is not None
    with pytest.raises(CheckpointError):
        store.update_managed_bindings("c1", {"0000-03-00-1": {"version": 1}})
    assert prepared_claim(store, "c1").devices[0].managed_binding is None
    assert storage.data == persisted


def test_remove_unknown_claim_is_a_noop_without_write() -> None:
    storage = FailingStorage()
    store = PreparedClaims(storage)
    storage.fail = True
    assert store.remove_claim("nope") is None


def test_snapshots_and_inputs_are_deep_copies() -> None:
    store = PreparedClaims(FailingStorage())
    config: dict[str, Any] = {"driver": "", "nested": {"a": 1}}
    record = claim_record(devices=(prepared_device(config=config),))
    store.add_claim(record)
    config["nested"]["a"] = 2  # the caller's object changes after the call
    snap = prepared_claim(store, "c1")
    snap.devices[0].config["nested"]["a"] = 3
    assert prepared_claim(store, "c1").devices[0].config == {"driver": "", "nested": {"a": 1}}


def test_managed_binding_record_round_trips_and_unknown_version_fails_loudly(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    store = PreparedClaims(FileStorage(path))
    store.add_claim(claim_record())
    store.update_managed_bindings("c1", {"0000-03-00-1": {"version": 1, "state": "Pending"}})
    assert managed_binding(PreparedClaims(FileStorage(path)), "c1") == {
        "version": 1,
        "state": "Pending",
    }
    with pytest.raises(CheckpointError) as err:
        store.update_managed_bindings("c1", {"0000-09-00-1": {"version": 1}})
    assert err.value.reason == "DeviceNotInClaim"

    records = decode(path.read_bytes())
    future = {
        "c1": ClaimRecord(
            **{
                **records["c1"].__dict__,
                "devices": (
                    PreparedDevice(
                        **{**records["c1"].devices[0].__dict__, "managed_binding": {"version": 99}}
                    ),
                ),
            }
        )
    }
    path.write_bytes(encode(future))
    before = path.read_bytes()
    with pytest.raises(CheckpointError) as err:
        PreparedClaims(FileStorage(path))
    assert err.value.reason == "UnknownManagedBindingVersion"
    assert "c1" in err.value.message and "99" in err.value.message
    assert path.read_bytes() == before


def test_unknown_top_level_version_and_tampering_fail_and_delete_nothing(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    PreparedClaims(FileStorage(path)).add_claim(claim_record())
    doc = json.loads(path.read_bytes())
    doc["version"] = 2
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError) as err:
        PreparedClaims(FileStorage(path))
    assert err.value.reason == "UnknownCheckpointVersion"

    doc["version"] = 1
    doc["data"]["claims"]["c1"]["podUID"] = "someone-else"
    path.write_text(json.dumps(doc))
    with pytest.raises(CheckpointError) as err:
        PreparedClaims(FileStorage(path))
    assert err.value.reason == "CorruptCheckpoint"
    assert "checksum" in err.value.message
    assert path.exists()


def test_file_is_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between writing the temp file and renaming leaves the old content readable."""
    path = tmp_path / "checkpoint.json"
    store = PreparedClaims(FileStorage(path))
    store.add_claim(claim_record("c1"))
    old = path.read_bytes()

    def crash(*_a: object) -> None:
        raise OSError(5, "simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(CheckpointError):
        store.add_claim(claim_record("c2"))
    assert path.read_bytes() == old
    assert PreparedClaims(FileStorage(path)).snapshot_claim("c2") is None


def test_concurrent_adds_of_one_claim_uid_admit_exactly_one() -> None:
    store = PreparedClaims(FailingStorage())
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def add(i: int) -> None:
        start.wait()
        try:
            store.add_claim(claim_record("c1", f"pod-{i}"))
            outcomes.append("ok")
        except CheckpointError as err:
            outcomes.append(err.reason)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["ClaimReleaseInProgress"] * 7 + ["ok"]


def test_the_json_copy_is_deep_and_keeps_what_it_does_not_know() -> None:
    inner: list[Any] = [{"a": 1}, ("t", {"b": 2})]
    special = OrderedDict(x=[1])
    doc = {"list": inner, "special": special, "n": None, "f": 1.5}
    copied = _copied(doc)
    assert copied == doc
    assert copied["list"] is not inner and copied["list"][0] is not inner[0]
    assert copied["list"][1][1] is not inner[1][1] and isinstance(copied["list"][1], tuple)
    assert type(copied["special"]) is OrderedDict and copied["special"] is not special
    assert copied["special"]["x"] is not special["x"]
