"""The checkpoint codec: canonical, versioned, checksummed bytes, and a typed error for any damage."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core.claimrecord import CheckpointError, ClaimRecord, PreparedDevice, decode, encode

V1_FILE = Path(__file__).parents[1] / "state" / "data" / "checkpoint-v1.json"
PATH = "/var/lib/sriov/checkpoint.json"


def prepared_device(name: str = "0000-03-00-1", config: dict[str, Any] | None = None) -> PreparedDevice:
    return PreparedDevice(
        request_names=("vf",),
        pool="node-a",
        device=name,
        pci_address="0000:03:00.1",
        cdi_device_ids=("sriovnetwork.k8snetworkplumbingwg.io/vf=c1-" + name,),
        original_driver="mlx5_core",
        config=config if config is not None else {"driver": "", "ifName": "net1"},
        env={"SRIOVNETWORK_VF_DEVICE_0000_03_00_1": "0000:03:00.1"},
    )


def claim_record(
    uid: str = "c1", pod: str = "p1", devices: tuple[PreparedDevice, ...] | None = None
) -> ClaimRecord:
    return ClaimRecord(
        claim_uid=uid,
        namespace="ns",
        name="claim-" + uid,
        pod_uid=pod,
        devices=devices or (prepared_device(),),
    )


def sealed(data: object, version: object = 1) -> bytes:
    """A checkpoint document around `data` whose checksum verifies."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return json.dumps(
        {"version": version, "checksum": hashlib.sha256(canonical).hexdigest(), "data": data}
    ).encode()


def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(encode({"c1": claim_record()}))["data"]
    return data


def _edit_device(edit: Callable[[dict[str, Any]], object]) -> Callable[[dict[str, Any]], object]:
    return lambda data: edit(data["claims"]["c1"]["devices"][0])


def test_encoding_is_canonical_versioned_and_checksummed() -> None:
    full = replace(
        prepared_device("0000-03-00-2", {"driver": "vfio-pci", "vlan": {"id": 7}}),
        if_name="dra0",
        device_nodes=("/dev/vfio/42", "/dev/vfio/vfio"),
        managed_binding={"version": 1, "phase": "Pending"},
    )
    records = {"c1": claim_record(devices=(prepared_device(), full))}
    raw = encode(records)
    doc = json.loads(raw)
    assert raw == json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    assert doc["version"] == 1
    data = doc["data"]
    assert (
        doc["checksum"]
        == hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    )
    plain, managed = data["claims"]["c1"].pop("devices")
    assert data == {"claims": {"c1": {"namespace": "ns", "name": "claim-c1", "podUID": "p1"}}}
    assert "managedBinding" not in plain
    assert managed == {
        "requestNames": ["vf"],
        "pool": "node-a",
        "device": "0000-03-00-2",
        "pciAddress": "0000:03:00.1",
        "cdiDeviceIDs": ["sriovnetwork.k8snetworkplumbingwg.io/vf=c1-0000-03-00-2"],
        "originalDriver": "mlx5_core",
        "config": {"driver": "vfio-pci", "vlan": {"id": 7}},
        "ifName": "dra0",
        "env": {"SRIOVNETWORK_VF_DEVICE_0000_03_00_1": "0000:03:00.1"},
        "deviceNodes": ["/dev/vfio/42", "/dev/vfio/vfio"],
        "managedBinding": {"version": 1, "phase": "Pending"},
    }
    assert decode(raw) == records
    assert encode(decode(raw)) == raw


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        pytest.param(b"\xff{}", "not JSON: UnicodeDecodeError", id="not utf-8"),
        pytest.param(b"{", "not JSON: JSONDecodeError", id="not json"),
        pytest.param(b"[" * 100_000, "not JSON: RecursionError", id="too deep"),
        pytest.param(b"[]", "top level: missing 'version'", id="not an object"),
        pytest.param(b'{"version":"1"}', "top level: 'version' has the wrong type", id="version text"),
        pytest.param(b'{"version":true}', "top level: 'version' has the wrong type", id="version bool"),
        pytest.param(b'{"version":1}', "top level: missing 'checksum'", id="no checksum"),
        pytest.param(
            b'{"version":1,"checksum":"x","data":[]}', "top level: 'data' has the wrong type", id="data list"
        ),
        pytest.param(b'{"version":1,"checksum":"x","data":{}}', "checksum mismatch", id="checksum"),
        pytest.param(sealed({}), "data: missing 'claims'", id="no claims"),
        pytest.param(sealed({"claims": {"c1": []}}), "claim c1: missing 'devices'", id="claim list"),
        pytest.param(
            sealed({"claims": {"c1": {"devices": []}}}), "claim c1: missing 'namespace'", id="no namespace"
        ),
    ],
)
def test_damage_is_a_typed_error_that_names_the_file(raw: bytes, why: str) -> None:
    with pytest.raises(CheckpointError) as err:
        decode(raw, PATH)
    assert err.value.reason == "CorruptCheckpoint"
    assert err.value.message.startswith(f"checkpoint {PATH} is unreadable ({why}); it was left untouched.")
    assert err.value.details == {"path": PATH}


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        pytest.param(
            _edit_device(lambda d: d["env"].update(X=1)),
            "claim c1 device 0: env values must be strings",
            id="env",
        ),
        pytest.param(_edit_device(lambda d: d.pop("env")), "claim c1 device 0: missing 'env'", id="no env"),
        pytest.param(
            _edit_device(lambda d: d.update(requestNames=["vf", 1])),
            "claim c1 device 0: expected a list of strings",
            id="request names",
        ),
        pytest.param(
            _edit_device(lambda d: d.update(pool=7)),
            "claim c1 device 0: 'pool' has the wrong type",
            id="pool",
        ),
        pytest.param(
            _edit_device(lambda d: d.update(managedBinding={"phase": "Ready"})),
            "claim c1 device 0.managedBinding: missing 'version'",
            id="binding without version",
        ),
        pytest.param(
            _edit_device(lambda d: d.update(managedBinding={"version": True})),
            "claim c1 device 0.managedBinding: 'version' has the wrong type",
            id="binding version bool",
        ),
    ],
)
def test_a_damaged_device_is_a_typed_error(edit: Callable[[dict[str, Any]], object], why: str) -> None:
    data = _data()
    edit(data)
    with pytest.raises(CheckpointError) as err:
        decode(sealed(data), PATH)
    assert err.value.reason == "CorruptCheckpoint"
    assert err.value.message.startswith(f"checkpoint {PATH} is unreadable ({why});")


def test_an_unknown_top_level_version_is_refused_before_anything_else() -> None:
    with pytest.raises(CheckpointError) as err:
        decode(sealed({"claims": "not even checked"}, version=2), PATH)
    assert err.value.reason == "UnknownCheckpointVersion"
    assert err.value.message.startswith(f"checkpoint {PATH} has format version 2, this driver understands 1;")
    assert err.value.details == {"path": PATH, "version": 2}


def test_an_unknown_managed_binding_version_is_refused() -> None:
    data = _data()
    data["claims"]["c1"]["devices"][0]["managedBinding"] = {"version": 99}
    with pytest.raises(CheckpointError) as err:
        decode(sealed(data), PATH)
    assert err.value.reason == "UnknownManagedBindingVersion"
    assert err.value.message.startswith(
        f"checkpoint {PATH} claim c1 device 0 holds a managed binding of version 99, which this driver "
        "build does not understand; nothing was deleted."
    )
    assert err.value.details == {"path": PATH, "version": 99}


_VALID = encode({"c1": claim_record()}).rstrip(b"\n")


@given(st.integers(min_value=0, max_value=len(_VALID) - 1))
def test_truncated_checkpoint_is_a_typed_error(cut: int) -> None:
    with pytest.raises(CheckpointError) as err:
        decode(_VALID[:cut])
    assert err.value.reason == "CorruptCheckpoint"


@given(st.integers(min_value=0, max_value=len(_VALID) * 8 - 1))
def test_bit_flipped_checkpoint_never_crashes(bit: int) -> None:
    raw = bytearray(_VALID)
    raw[bit // 8] ^= 1 << (bit % 8)
    try:
        records = decode(bytes(raw))
    except CheckpointError as err:
        assert err.reason in {"CorruptCheckpoint", "UnknownCheckpointVersion"}
    else:
        # only a flip in insignificant whitespace/escape-equivalent bytes may still verify
        assert records == decode(_VALID)


@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_a_typed_error(raw: bytes) -> None:
    with pytest.raises(CheckpointError):
        decode(raw)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=10,
    )
)
def test_wrongly_shaped_but_checksummed_json_is_a_typed_error(data: object) -> None:
    # any outcome but a typed error or a clean decode is a crash
    with contextlib.suppress(CheckpointError):
        decode(sealed(data))


def test_checked_in_version_1_file_still_loads() -> None:
    """A file written by this format version must stay readable by every later build."""
    raw = V1_FILE.read_bytes()
    (record,) = decode(raw).values()
    assert record.pod_uid == "9d3b7e44-0000-4000-8000-0000000000aa"
    (device,) = record.devices
    assert (device.device, device.pci_address, device.original_driver) == (
        "0000-17-00-1",
        "0000:17:00.1",
        "mlx5_core",
    )
    assert device.config == {"driver": "vfio-pci", "ifName": "net1"}
    assert device.device_nodes == ("/dev/vfio/42", "/dev/vfio/vfio")
    assert device.managed_binding is None
    assert encode(decode(raw)) == raw  # the encoding is canonical


def test_over_long_integer_is_a_typed_error() -> None:
    # json.loads raises a plain ValueError (not JSONDecodeError) past Python's int-digit limit
    with pytest.raises(CheckpointError) as err:
        decode(b'{"version":' + b"9" * 5000 + b"}")
    assert err.value.reason == "CorruptCheckpoint"
