"""Hostile input to the driver's pure surfaces: NAD templates, Pod annotations, the checkpoint file.

Every case ends in a result or a ReasonedError; on success the output must itself be stable
(rendering a rendered config changes nothing, a merged Pod needs no second patch), and a corrupt
checkpoint is refused without touching the file.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from sriov_contract.errors import ReasonedError
from sriov_contract.identity import config_sha256
from sriov_contract.keys import NETWORKS_ANNOTATION, REGISTRY_ANNOTATION
from sriov_dra.core import checkpointrecovery, claimrecord
from sriov_dra.core.selection import ManagedBinding, merge_managed_selections, release_claim_selections
from sriov_dra.core.shadowconfig import render_shadow_config
from sriov_dra.state import checkpoint
from sriov_lib import rawjson
from tests.fuzz.hostile import emit, hostile_text, json_values
from tests.fuzz.test_fuzz_annotations import NETWORK_SEEDS, assert_typed
from tests.unit.sriov_dra.core import test_selection

PCI = "0000:03:00.1"
NS = "ai-workloads"

CONFIG_SEEDS: list[Any] = [
    {
        "cniVersion": "1.0.0",
        "name": "rail-a-net",
        "type": "sriov",
        "vlan": 100,
        "spoofchk": "on",
        "ipam": {"type": "whereabouts", "range": "10.56.0.0/24", "routes": [{"dst": "0.0.0.0/0"}]},
    },
    {
        "cniVersion": "0.4.0",
        "name": "rail-b-net",
        "plugins": [
            {
                "type": "sriov",
                "deviceID": PCI,
                "pciBusID": PCI,
                "ipam": {"type": "host-local", "subnet": "10.0.0.0/24"},
            },
            {"type": "tuning", "mtu": 9000, "sysctl": {"net.ipv4.conf.IFNAME.arp_ignore": "1"}},
        ],
    },
    {"cniVersion": "1.1.0", "type": "sriov", "capabilities": {"ips": True}, "ipam": {}},
]
PCI_TEXT = st.one_of(
    st.just(PCI),
    st.just(PCI),
    st.sampled_from(["0000:03:00.2", "0000:FF:1f.7", "pci:0000:03:00.1", "", "0000:03:00"]),
    st.text(max_size=16),
)


@st.composite
def source_nads(draw: st.DrawFn) -> Any:
    nad: dict[str, Any] = {
        "metadata": {"name": "rail-a-net", "namespace": NS, "uid": "u"},
        "spec": {"config": draw(hostile_text(CONFIG_SEEDS))},
    }
    # The surrounding object comes from the API and is nearly always well formed; sometimes not.
    if draw(st.integers(0, 9)) == 0:
        nad[draw(st.sampled_from(["metadata", "spec"]))] = draw(json_values)
    return nad


@given(source_nads(), PCI_TEXT)
def test_fuzz_render_shadow_config(nad: Any, pci: str) -> None:
    try:
        rendered = render_shadow_config(nad, pci)
    except ReasonedError as err:
        assert_typed(err)
        return
    event("rendered")
    doc: Any = rawjson.loads(rendered.config)
    plugin = doc if rendered.plugin_index is None else doc["plugins"][rendered.plugin_index]
    assert plugin["deviceID"] == rendered.pci_address == pci.lower()
    assert rendered.sha256 == config_sha256(rendered.config)
    # The frozen bytes are a fixed point: rendering them again for the same VF changes nothing.
    again = render_shadow_config({**nad, "spec": {"config": rendered.config.decode()}}, pci)
    assert again.config == rendered.config


# The selection unit tests' binding builder: same Pod, claim and namespace as used here.
POD_UID, CLAIM = test_selection.POD_UID, test_selection.CLAIM_A


DESIRED: list[ManagedBinding] = [test_selection.binding(1), test_selection.binding(2)]
_OWNED = DESIRED[0].entry
REGISTRY_SEEDS: list[Any] = [
    {"version": 1, "podUID": POD_UID, "entries": [_OWNED.to_dict()]},
    {"version": 1, "podUID": POD_UID, "entries": []},
]
SELECTION_SEEDS: list[Any] = [
    *NETWORK_SEEDS,
    [
        {"name": _OWNED.name, "namespace": NS, "interface": _OWNED.interface},
        {"name": "manual", "interface": "net9"},
    ],
]


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    annotations: dict[str, str] = {"unrelated": "keep"}
    if draw(st.booleans()):
        annotations[NETWORKS_ANNOTATION] = draw(hostile_text(SELECTION_SEEDS))
    if draw(st.booleans()):
        annotations[REGISTRY_ANNOTATION] = draw(hostile_text(REGISTRY_SEEDS))
    return {
        "metadata": {
            "name": "p",
            "namespace": NS,
            "uid": POD_UID,
            "resourceVersion": "7",
            "annotations": annotations,
        }
    }


def _apply(pod: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply our patches' add/replace/remove of annotations (the tests are checked separately)."""
    out = copy.deepcopy(pod)
    meta = out["metadata"]
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if op["op"] == "test":
            assert meta[tokens[1]] == op["value"]
        elif tokens == ["metadata", "annotations"]:
            meta["annotations"] = op["value"]
        elif op["op"] == "remove":
            del meta["annotations"][tokens[2]]
        else:
            meta["annotations"][tokens[2]] = op["value"]
    return out


@given(pods(), st.sampled_from([DESIRED[:1], DESIRED]))
def test_fuzz_merge_managed_selections(pod: dict[str, Any], desired: list[ManagedBinding]) -> None:
    try:
        ops = merge_managed_selections(pod, desired)
    except ReasonedError as err:
        assert_typed(err)
        return
    event("merged" if ops else "already merged")
    merged = _apply(pod, ops) if ops else pod
    # Converged: the patched Pod needs nothing more, and releasing the claim is a valid patch too.
    assert merge_managed_selections(merged, desired) is None
    released = release_claim_selections(merged, CLAIM)
    assert released is not None
    assert release_claim_selections(_apply(merged, released), CLAIM) is None


@given(pods())
def test_fuzz_release_claim_selections(pod: dict[str, Any]) -> None:
    try:
        ops = release_claim_selections(pod, CLAIM)
    except ReasonedError as err:
        assert_typed(err)
        return
    event("released" if ops else "nothing to release")
    if ops:
        assert release_claim_selections(_apply(pod, ops), CLAIM) is None


def _record(uid: str, n: int, managed: bool) -> claimrecord.ClaimRecord:
    device = claimrecord.PreparedDevice(
        request_names=("vf",),
        pool="sriov-node-0",
        device=f"pf0vf{n}",
        pci_address=f"0000:03:00.{n}",
        cdi_device_ids=(f"k8s.sriov/vf={uid}-{n}",),
        original_driver="iavf",
        config={"driver": "", "netAttachDefName": "rail-a-net", "mtu": 9000},
        if_name=f"dra{n}",
        env={"SRIOV_PCI": f"0000:03:00.{n}"},
        device_nodes=(),
        managed_binding={"version": 1, "state": "Ready", "shadowUID": ""} if managed else None,
    )
    return claimrecord.ClaimRecord(uid, NS, "claim", POD_UID, (device,))


CHECKPOINT_SEEDS: list[Any] = [
    json.loads(claimrecord.encode({"c1": _record("c1", 1, True), "c2": _record("c2", 2, False)})),
    json.loads(claimrecord.encode({})),
]


def _resealed(doc: Any) -> bytes:
    """Recompute the checksum over a mutated payload, so the damage reaches the field checks."""
    if isinstance(doc, dict) and "data" in doc:
        with contextlib.suppress(TypeError, ValueError):
            doc["checksum"] = hashlib.sha256(claimrecord._canonical(doc["data"])).hexdigest()
    return emit(doc).encode()


@st.composite
def damaged_checkpoints(draw: st.DrawFn) -> bytes:
    raw = claimrecord.encode({"c1": _record("c1", 1, True)})
    how = draw(
        st.sampled_from(
            ["truncate", "bitflip", "structured", "resealed", "version", "binding-version", "bytes"]
        )
    )
    if how == "truncate":
        return raw[: draw(st.integers(0, len(raw) - 1))]
    if how == "bitflip":
        flipped = bytearray(raw)
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(raw) - 1))
            flipped[i] ^= 1 << draw(st.integers(0, 7))
        return bytes(flipped)
    if how == "version":
        doc = json.loads(raw)
        doc["version"] = draw(st.integers() | st.sampled_from([0, 2, True, "1", 1.0, None]))
        return emit(doc).encode()
    if how == "binding-version":
        doc = json.loads(raw)
        device = doc["data"]["claims"]["c1"]["devices"][0]
        device["managedBinding"]["version"] = draw(st.integers() | st.sampled_from([0, 2, True, "1", None]))
        return _resealed(doc)
    if how == "bytes":
        return draw(st.binary(max_size=200))
    text = draw(hostile_text(CHECKPOINT_SEEDS))
    if how == "structured":
        return text.encode("utf-8", "surrogatepass")
    try:
        return _resealed(json.loads(text))
    except (ValueError, RecursionError):
        return text.encode("utf-8", "surrogatepass")


@given(damaged_checkpoints())
def test_fuzz_checkpoint_decode(raw: bytes) -> None:
    try:
        records = claimrecord.decode(raw, "/var/lib/fuzz/checkpoint.json")
    except claimrecord.CheckpointError as err:
        assert_typed(err)
        return
    event("accepted")
    # Whatever is accepted survives its own encoding unchanged.
    assert claimrecord.decode(claimrecord.encode(records)) == records


@given(damaged_checkpoints(), st.one_of(st.none(), damaged_checkpoints()))
def test_fuzz_a_damaged_checkpoint_never_stops_a_start(current: bytes, previous: bytes | None) -> None:
    """Only an unknown version, which is not damage, may stop a start; anything else picks a generation."""
    try:
        start = checkpointrecovery.starting_point(
            current, previous, current_path="/c/checkpoint.json", previous_path="/c/checkpoint.prev.json"
        )
    except claimrecord.CheckpointError as err:
        assert_typed(err)
        assert err.reason in ("UnknownCheckpointVersion", "UnknownManagedBindingVersion")
        return
    event(start.generation)
    assert start.generation in (
        checkpointrecovery.CURRENT,
        checkpointrecovery.PREVIOUS,
        checkpointrecovery.EMPTY,
    )
    assert (start.generation == checkpointrecovery.CURRENT) == (not start.damaged)


@pytest.fixture(scope="module")
def checkpoint_dir() -> Any:
    with tempfile.TemporaryDirectory(prefix="fuzz-checkpoint-") as d:
        yield Path(d)


@given(damaged_checkpoints())
def test_fuzz_corrupt_checkpoint_file_deletes_nothing(checkpoint_dir: Path, raw: bytes) -> None:
    path = checkpoint_dir / "checkpoint.json"
    path.write_bytes(raw)
    before = sorted(os.listdir(checkpoint_dir))
    try:
        claims = checkpoint.PreparedClaims(checkpoint.FileStorage(path), str(path))
    except claimrecord.CheckpointError as err:
        assert_typed(err)
        assert err.reason in ("CorruptCheckpoint", "UnknownCheckpointVersion", "UnknownManagedBindingVersion")
        assert str(path) in err.message
    else:
        assert isinstance(claims.snapshot_all(), list)
    assert path.read_bytes() == raw
    assert sorted(os.listdir(checkpoint_dir)) == before
