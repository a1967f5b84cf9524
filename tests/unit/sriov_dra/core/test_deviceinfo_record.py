"""The discovered PCI/PF/RDMA facts frozen in a binding record and carried by its shadow (spec 10.4)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sriov_contract.deviceinfo import parse_device_info
from sriov_contract.keys import BINDING_ANNOTATION, DEVICE_INFO_ANNOTATION
from sriov_dra.core.bindingrecord import BindingRecord, BindingRecordError, frozen_device_info, record_of
from sriov_dra.core.shadowspec import ShadowError, check_shadow, restore_owned_patch, shadow_object
from sriov_dra.model import RdmaDevice, VirtualFunction
from tests.unit.sriov_dra.core.test_bindingrecord import RECORD, SHADOW_UID, checkpointed

WITH_INFO = replace(RECORD, pf_pci_address="0000:17:00.0", rdma_device="mlx5_1")


def _info_json(record: BindingRecord) -> str:
    info = record.device_info()
    assert info is not None
    return info.to_json()


def test_discovery_fills_the_pf_and_the_rdma_name_never_the_boolean() -> None:
    vf = VirtualFunction("0000-17-00-1", "0000:17:00.1", "0000:17:00.0", "ens1f0", 0)
    assert frozen_device_info(vf) == {"pf_pci_address": "0000:17:00.0", "rdma_device": ""}
    rdma = replace(vf, rdma=RdmaDevice("mlx5_1", "uverbs1"))
    assert frozen_device_info(rdma) == {"pf_pci_address": "0000:17:00.0", "rdma_device": "mlx5_1"}


def test_the_checkpoint_keeps_it_optionally_and_old_records_read_as_before() -> None:
    raw = WITH_INFO.to_json()
    assert (raw["pfPciAddress"], raw["rdmaDevice"]) == ("0000:17:00.0", "mlx5_1")
    assert record_of(*checkpointed(raw)) == WITH_INFO
    assert "pfPciAddress" not in RECORD.to_json()
    assert RECORD.device_info() is None
    with pytest.raises(BindingRecordError):
        record_of(*checkpointed({**raw, "rdmaDevice": "mlx5/1"}))


def test_the_shadow_carries_it_beside_the_binding() -> None:
    annotations = shadow_object(WITH_INFO)["metadata"]["annotations"]
    info = parse_device_info(annotations[DEVICE_INFO_ANNOTATION])
    assert (info.pci_address, info.pf_pci_address, info.rdma_device) == (
        RECORD.pci_address,
        "0000:17:00.0",
        "mlx5_1",
    )
    assert annotations[BINDING_ANNOTATION] == RECORD.binding().to_json()  # the binding is unchanged
    assert DEVICE_INFO_ANNOTATION not in shadow_object(RECORD)["metadata"]["annotations"]


def _written(record: BindingRecord = WITH_INFO) -> dict[str, Any]:
    obj = shadow_object(record)
    obj["metadata"].update(uid=SHADOW_UID, resourceVersion="12")
    return obj


def test_an_edited_added_or_dropped_device_info_is_not_our_shadow() -> None:
    check_shadow(_written(), WITH_INFO, releasing=False)
    edited = _written()
    edited["metadata"]["annotations"][DEVICE_INFO_ANNOTATION] = _info_json(
        replace(WITH_INFO, rdma_device="mlx5_9")
    )
    added = _written(RECORD)
    added["metadata"]["annotations"][DEVICE_INFO_ANNOTATION] = _info_json(WITH_INFO)
    dropped = _written()
    del dropped["metadata"]["annotations"][DEVICE_INFO_ANNOTATION]
    for obj, record in ((edited, WITH_INFO), (added, RECORD), (dropped, WITH_INFO)):
        with pytest.raises(ShadowError):
            check_shadow(obj, record, releasing=False)


def test_repair_restores_a_dropped_device_info() -> None:
    dropped = _written()
    del dropped["metadata"]["annotations"][DEVICE_INFO_ANNOTATION]
    patch = restore_owned_patch(dropped, WITH_INFO)
    assert patch is not None
    (annotations,) = [op["value"] for op in patch if op["path"] == "/metadata/annotations"]
    assert annotations[DEVICE_INFO_ANNOTATION] == _info_json(WITH_INFO)
    assert restore_owned_patch(_written(), WITH_INFO) is None
