"""Opening the checkpoint at start-up: a damaged one is moved aside, lost bindings are rebuilt from
the API before anything is written, and the recovery is recorded and told once."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sriov_dra.core.bindingrecord import PENDING
from sriov_dra.core.checkpointrecovery import PREVIOUS, Recovery
from sriov_dra.recovery.recoveredstart import ApiListings, open_checkpoint
from sriov_dra.state.checkpoint import GenerationFiles, PreparedClaims, RecoveryLog
from tests.fakes.driver_env import NODE, NODE_UID, NS, Env, vf_config

NOW = datetime(2026, 12, 5, 0, 37, tzinfo=UTC)


def prepare_two(env: Env, files: GenerationFiles) -> list[str]:
    """Two Ready claims written through generation-keeping files, one write at a time."""
    env.restart(PreparedClaims(files, records={}))
    uids = []
    for i, vf in enumerate(("0000-17-00-1", "0000-17-00-2")):
        pod = env.pod(name=f"pod{i}", claims=[{"name": "vfs", "resourceClaimName": f"c{i}"}])
        ref = env.claim(f"c{i}", pod, [vf], [vf_config(netAttachDefName="rail-a")])
        assert env.prepare(ref).error == ""
        uids.append(ref.uid)
    return uids


def opened(env: Env, files: GenerationFiles, told: list[Recovery], *, managed: bool = True) -> PreparedClaims:
    return open_checkpoint(
        files,
        node_name=NODE,
        node_uid=NODE_UID,
        listings=ApiListings(env.api, env.api, env.api) if managed else None,
        pci_of={name: vf.pci_address for name, vf in env.inventory.items()},
        now=NOW,
        tell=told.append,
    )


@pytest.fixture
def files(tmp_path: Path) -> GenerationFiles:
    return GenerationFiles(tmp_path / "plugin" / "checkpoint.json")


def test_a_sound_checkpoint_opens_silently(env: Env, files: GenerationFiles) -> None:
    files.path.parent.mkdir()
    uids = prepare_two(env, files)
    told: list[Recovery] = []
    assert sorted(r.claim_uid for r in opened(env, files, told).snapshot_all()) == sorted(uids)
    assert told == [] and RecoveryLog(files.path).read() is None


def test_a_bit_flipped_checkpoint_loses_no_binding(env: Env, files: GenerationFiles) -> None:
    files.path.parent.mkdir()
    c0, c1 = prepare_two(env, files)
    raw = bytearray(files.path.read_bytes())
    raw[len(raw) // 2] ^= 0x04
    files.path.write_bytes(bytes(raw))
    told: list[Recovery] = []
    checkpoint = opened(env, files, told)
    # the previous generation lacks c1's Ready step only: c1 is there, Pending; nothing is lost
    assert sorted(r.claim_uid for r in checkpoint.snapshot_all()) == sorted([c0, c1])
    (recovery,) = told
    assert recovery.start.generation == PREVIOUS and recovery.rebuilt == () and recovery.not_rebuilt == ()
    (quarantined,) = recovery.moved.values()
    assert Path(quarantined).read_bytes() == bytes(raw) and Path(quarantined).name.startswith(
        "checkpoint.json.damaged-"
    )
    assert RecoveryLog(files.path).read() == recovery.to_json()
    assert files.decide().generation == "current"  # written back as the current generation


def test_with_both_generations_damaged_the_bindings_are_rebuilt_from_the_api(
    env: Env, files: GenerationFiles
) -> None:
    files.path.parent.mkdir()
    c0, c1 = prepare_two(env, files)
    files.path.write_bytes(files.path.read_bytes()[:40])
    files.previous.write_bytes(b"")
    told: list[Recovery] = []
    checkpoint = opened(env, files, told)
    assert sorted(r.claim_uid for r in checkpoint.snapshot_all()) == sorted([c0, c1])
    assert {(d.managed_binding or {})["phase"] for r in checkpoint.snapshot_all() for d in r.devices} == {
        PENDING
    }
    (recovery,) = told
    assert recovery.start.generation == "empty" and sorted(recovery.rebuilt) == sorted([c0, c1])
    assert len(recovery.moved) == 2


def test_a_failing_api_moves_and_writes_nothing_so_the_next_start_does_the_same(
    env: Env, files: GenerationFiles
) -> None:
    files.path.parent.mkdir()
    prepare_two(env, files)
    files.path.write_bytes(b"{")
    before = sorted(p.name for p in files.path.parent.iterdir())

    class Down:
        def list_shadows(self, node_uid: str) -> list[dict[str, object]]:
            raise OSError("connection refused")

    with pytest.raises(OSError):
        open_checkpoint(
            files,
            node_name=NODE,
            node_uid=NODE_UID,
            listings=ApiListings(Down(), env.api, env.api),
            pci_of={},
            now=NOW,
            tell=lambda _r: None,
        )
    assert sorted(p.name for p in files.path.parent.iterdir()) == before


def test_plain_mode_starts_from_the_previous_generation_without_rebuilding(
    env: Env, files: GenerationFiles
) -> None:
    files.path.parent.mkdir()
    c0, _c1 = prepare_two(env, files)
    files.path.write_bytes(b"")
    told: list[Recovery] = []
    assert c0 in {r.claim_uid for r in opened(env, files, told, managed=False).snapshot_all()}
    assert told[0].rebuilt == ()


def test_a_rebuild_reads_claims_in_its_shadows_and_pods_namespaces_only(
    env: Env, files: GenerationFiles
) -> None:
    """Claims the checkpoint no longer names are found through this node's shadows and Pods (their
    namespace), never through a cluster-wide listing (issue 34)."""
    files.path.parent.mkdir()
    c0, c1 = prepare_two(env, files)
    env.api.put("claims", {"metadata": {"namespace": "elsewhere", "name": "theirs", "uid": "f0-1"}})
    files.path.write_bytes(b"{")
    files.previous.write_bytes(b"")
    env.api.claim_namespaces_listed.clear()
    checkpoint = opened(env, files, [])
    assert sorted(r.claim_uid for r in checkpoint.snapshot_all()) == sorted([c0, c1])
    assert env.api.claim_namespaces_listed == [NS]
