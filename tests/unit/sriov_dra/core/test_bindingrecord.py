"""The managed-binding record of a prepared VF: what it publishes, and its checkpoint JSON decoded
strictly against the claim and device that carry it."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from sriov_contract.binding import Binding, SourceRef
from sriov_contract.errors import ContractError
from sriov_contract.identity import BindingIdentity
from sriov_contract.keys import PROTOCOL_VERSION
from sriov_contract.registry import RegistryEntry
from sriov_dra.core.bindingrecord import (
    DELETING,
    READY,
    BindingRecord,
    BindingRecordError,
    phases_of,
    record_of,
    records_of,
)
from sriov_dra.core.claimrecord import ClaimRecord, PreparedDevice
from sriov_dra.core.selection import ManagedBinding
from sriov_dra.core.template import NamespacedName
from sriov_dra.model import DRIVER_NAME
from tests.unit.sriov_dra.core.test_claimrecord import claim_record, prepared_device

NODE_UID = "6b1f0e4e-1111-4222-8333-944455556666"
POD_UID = "0a4b3c2d-1111-4222-8333-000000000001"
OTHER_UID = "0a4b3c2d-1111-4222-8333-000000000002"
SHADOW_UID = "5e5e5e5e-1111-4222-8333-000000000003"
CLAIM_UID = "c1a1c1a1-1111-4222-8333-000000000004"
CONFIG = '{"cniVersion":"1.0.0","name":"rail-a","type":"sriov","vlan":100}'
CONFIG_SHA256 = hashlib.sha256(CONFIG.encode()).hexdigest()
SOURCE = SourceRef("ns", "rail-a", "5a5a5a5a-1111-4222-8333-000000000005", "7")
DEVICE = "0000-17-00-1"

RECORD = BindingRecord(
    phase=READY,
    identity=BindingIdentity(PROTOCOL_VERSION, NODE_UID, POD_UID, CLAIM_UID, DRIVER_NAME, "node-a", DEVICE),
    node_name="node-a",
    pod_namespace="ns",
    pod_name="pod",
    plan_index=0,
    interface="dra0",
    pci_address="0000:17:00.1",
    source=SOURCE,
    config=CONFIG,
    shadow_uid=SHADOW_UID,
)

WHERE = f"claim ns/claim-{CLAIM_UID} ({CLAIM_UID}) device {DEVICE}"


def checkpointed(
    binding: Mapping[str, Any] | None, *more: PreparedDevice
) -> tuple[ClaimRecord, PreparedDevice]:
    """RECORD's claim as the checkpoint holds it, its first device carrying `binding`."""
    device = replace(prepared_device(DEVICE), pci_address=RECORD.pci_address, managed_binding=binding)
    return claim_record(CLAIM_UID, POD_UID, (device, *more)), device


def test_the_checkpoint_json_holds_the_frozen_decision_and_decodes_back() -> None:
    raw = RECORD.to_json()
    assert raw == {
        "version": 1,
        "phase": "Ready",
        "attachmentID": RECORD.identity.attachment_id(),
        "nodeName": "node-a",
        "nodeUID": NODE_UID,
        "podNamespace": "ns",
        "podName": "pod",
        "planIndex": 0,
        "interface": "dra0",
        "source": {
            "namespace": "ns",
            "name": "rail-a",
            "uid": "5a5a5a5a-1111-4222-8333-000000000005",
            "resourceVersion": "7",
        },
        "config": CONFIG,
        "configSHA256": CONFIG_SHA256,
        "shadowUID": SHADOW_UID,
    }
    claim, device = checkpointed(raw)
    assert record_of(claim, device) == RECORD
    assert records_of(claim) == [(device, RECORD)]


def test_the_shadow_binding_and_pod_selection_carry_the_record() -> None:
    assert RECORD.config_sha256 == CONFIG_SHA256
    assert RECORD.binding() == Binding(
        version=PROTOCOL_VERSION,
        attachment_id=RECORD.identity.attachment_id(),
        pod_uid=POD_UID,
        claim_uid=CLAIM_UID,
        node_name="node-a",
        node_uid=NODE_UID,
        source=SOURCE,
        pci_address="0000:17:00.1",
        interface="dra0",
        config_sha256=CONFIG_SHA256,
    )
    assert RECORD.managed_selection() == ManagedBinding(
        RegistryEntry(
            attachment_id=RECORD.attachment_id,
            claim_uid=CLAIM_UID,
            namespace="ns",
            name=RECORD.identity.shadow_name(),
            uid=SHADOW_UID,
            interface="dra0",
            config_sha256=CONFIG_SHA256,
        ),
        NamespacedName("ns", "rail-a"),
    )


def test_phase_and_shadow_uid_change_alone() -> None:
    deleting = RECORD.with_phase(DELETING)
    assert (deleting.phase, RECORD.phase) == (DELETING, READY)
    assert deleting.with_phase(READY) == RECORD
    fresh = RECORD.with_shadow_uid("")
    assert (fresh.shadow_uid, fresh.with_shadow_uid(SHADOW_UID)) == ("", RECORD)


def test_a_device_prepared_without_a_binding_is_a_migration_condition() -> None:
    claim, device = checkpointed(None)
    with pytest.raises(BindingRecordError) as err:
        record_of(claim, device)
    assert err.value.reason == "ManagedBindingMissing"
    assert err.value.message.startswith(f"{WHERE} was prepared without a managed network binding")
    assert err.value.details == {"claim_uid": CLAIM_UID}


def _bad_field(key: str) -> str:
    return f"field {key!r} is missing or has the wrong type; the checkpoint was not changed."


def _mismatch(key: str) -> str:
    return f"recorded {key} does not match the rest of the record; the checkpoint was not changed."


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param({"phase": None}, _bad_field("phase"), id="phase missing"),
        pytest.param({"planIndex": "0"}, _bad_field("planIndex"), id="plan index text"),
        pytest.param({"planIndex": True}, _bad_field("planIndex"), id="plan index bool"),
        pytest.param({"source": []}, _bad_field("source"), id="source list"),
        pytest.param({"source": {}}, _bad_field("namespace"), id="source empty"),
        pytest.param({"source": {**SOURCE.to_dict(), "uid": 5}}, _bad_field("uid"), id="source uid"),
        pytest.param({"shadowUID": None}, _bad_field("shadowUID"), id="shadow uid missing"),
        pytest.param({"phase": "Gone"}, _mismatch("phase"), id="unknown phase"),
        pytest.param({"attachmentID": "0" * 64}, _mismatch("attachmentID"), id="attachment id"),
        pytest.param({"configSHA256": "0" * 64}, _mismatch("configSHA256"), id="config digest"),
        pytest.param({"config": CONFIG + " "}, _mismatch("configSHA256"), id="config edited"),
    ],
)
def test_a_malformed_or_tampered_record_is_refused(change: dict[str, object], why: str) -> None:
    claim, device = checkpointed({**RECORD.to_json(), **change})
    with pytest.raises(BindingRecordError) as err:
        record_of(claim, device)
    assert err.value.reason == "CorruptManagedBinding"
    assert err.value.message.startswith(f"{WHERE}: {why}")


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"nodeUID": "not a uid"}, id="identity"),
        pytest.param({"source": {**SOURCE.to_dict(), "namespace": "Not_A_Label"}}, id="source"),
    ],
)
def test_a_value_the_contract_refuses_is_a_corrupt_record(change: dict[str, object]) -> None:
    claim, device = checkpointed({**RECORD.to_json(), **change})
    with pytest.raises(BindingRecordError) as err:
        record_of(claim, device)
    cause = err.value.__cause__
    assert isinstance(cause, ContractError)
    assert err.value.reason == "CorruptManagedBinding"
    assert err.value.message == f"{WHERE}: {cause.message}"


def test_phases_are_read_without_decoding_the_rest() -> None:
    unbound = prepared_device("0000-17-00-2")
    claim, _device = checkpointed({"phase": DELETING, "planIndex": "garbage"}, unbound)
    assert phases_of(claim) == {DELETING, ""}
    with pytest.raises(BindingRecordError) as err:
        records_of(claim)
    assert err.value.reason == "CorruptManagedBinding"


def test_a_decoded_binding_follows_every_input_it_was_decoded_from() -> None:
    """Decoding is remembered across repair passes: a changed binding or claim must never be
    answered with the record decoded before the change."""
    claim, device = checkpointed(RECORD.to_json())
    assert record_of(claim, device) == RECORD
    moved, moved_device = checkpointed({**RECORD.to_json(), "phase": "Deleting", "shadowUID": OTHER_UID})
    assert record_of(moved, moved_device) == RECORD.with_phase("Deleting").with_shadow_uid(OTHER_UID)
    with pytest.raises(BindingRecordError) as err:  # the attachment ID names the recorded Pod
        record_of(replace(claim, pod_uid=OTHER_UID), device)
    assert err.value.reason == "CorruptManagedBinding"
    other_pci = replace(device, pci_address="0000:03:00.7")
    assert record_of(claim, other_pci).pci_address == "0000:03:00.7"
    assert record_of(claim, device) == RECORD
