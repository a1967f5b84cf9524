from sriov_operator.core.nodestate import SYNC_SUCCEEDED, PfReading, VfReading, interfaces, status_patch


def vf(pci: str, vf_id: int, driver: str = "mlx5_core", netdev: str = "") -> VfReading:
    return VfReading(pci, vf_id, "15b3", "1018", driver, netdev)


PF_B = PfReading(
    "ens2f0", "0000:04:00.0", "15b3", "1017", "ETH", 2, 8, (vf("0000:04:00.3", 1), vf("0000:04:00.2", 0))
)
PF_A = PfReading("ens1f0", "0000:03:00.0", "15b3", "1017", "", 0, 8, ())


def test_interfaces_are_sorted_and_omit_unknown_values_but_keep_zero_counts() -> None:
    out = interfaces([PF_B, PF_A])
    assert [i["pciAddress"] for i in out] == ["0000:03:00.0", "0000:04:00.0"]
    # no linkType when sysfs does not say; numVfs 0 is a value, not absence; no VF list when none
    assert out[0] == {
        "name": "ens1f0",
        "pciAddress": "0000:03:00.0",
        "vendor": "15b3",
        "deviceID": "1017",
        "numVfs": 0,
        "totalvfs": 8,
    }
    assert [v["pciAddress"] for v in out[1]["Vfs"]] == ["0000:04:00.2", "0000:04:00.3"]
    assert out[1]["Vfs"][0] == {
        "pciAddress": "0000:04:00.2",
        "vfID": 0,
        "vendor": "15b3",
        "deviceID": "1018",
        "driver": "mlx5_core",
    }


def test_status_patch_is_none_only_when_the_reported_inventory_is_current() -> None:
    first = status_patch(None, [PF_A, PF_B])
    assert first is not None
    assert first["status"]["syncStatus"] == SYNC_SUCCEEDED
    assert status_patch({"status": first["status"]}, [PF_B, PF_A]) is None
    # other status fields do not matter; a changed VF binding does
    assert status_patch({"status": {**first["status"], "other": 1}}, [PF_A, PF_B]) is None
    moved = PfReading(**{**PF_B.__dict__, "vfs": (vf("0000:04:00.2", 0, "vfio-pci"), vf("0000:04:00.3", 1))})
    assert status_patch({"status": first["status"]}, [PF_A, moved]) is not None
    assert status_patch({"metadata": {}}, []) == {"status": {"interfaces": [], "syncStatus": SYNC_SUCCEEDED}}
