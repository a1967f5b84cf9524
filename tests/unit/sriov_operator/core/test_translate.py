"""nicSelector translation and VF sets (spec 12.2.4): exact filters or a refusal, never match-all."""

from __future__ import annotations

from typing import Any

import pytest

from sriov_operator.core.translate import inventory, translate, vf_set
from sriov_operator.reasons import UNSUPPORTED_MANAGED_SELECTOR, OperatorError

STATE = {
    "status": {
        "interfaces": [
            {
                "name": "ens1f0",
                "altNames": ["enp3s0f0np0"],
                "pciAddress": "0000:03:00.0",
                "vendor": "15B3",
                "deviceID": "1017",
                "linkType": "ETH",
                "Vfs": [{"pciAddress": "0000:03:00.2", "vfID": 0, "deviceID": "1018"}],
            },
            {
                "name": "ens2f0",
                "pciAddress": "0000:04:00.0",
                "vendor": "15b3",
                "deviceID": "1019",
                "linkType": "IB",
                "Vfs": [{"pciAddress": "0000:04:00.2", "vfID": 0}],
            },
            {"name": "eno1", "pciAddress": "0000:05:00.0", "vendor": "8086", "deviceID": "1592"},
        ]
    }
}
PFS = inventory(STATE)


def spec(**sel: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {k: sel.pop(k) for k in ("linkType", "deviceType", "numVfs") if k in sel}
    return {"nicSelector": sel, "numVfs": extra.pop("numVfs", 4), **extra}


def refused(s: dict[str, Any]) -> str:
    with pytest.raises(OperatorError) as caught:
        translate("P on node n", s, PFS)
    assert caught.value.reason == UNSUPPORTED_MANAGED_SELECTOR
    return caught.value.message


def test_pf_names_and_alt_names_become_kernel_names() -> None:
    assert translate("p", spec(vendor="15b3", pfNames=["enp3s0f0np0"]), PFS) == {
        "vendors": ["15b3"],
        "pfNames": ["ens1f0"],
    }
    assert vf_set(spec(pfNames=["enp3s0f0np0"]), PFS) == {"0000:03:00.2"}


def test_device_ids_become_vf_device_ids_from_the_inventory_or_the_table() -> None:
    assert translate("p", spec(vendor="15b3", deviceID="1017"), PFS)["devices"] == ["1018"]
    # ens2f0's VF lists no device ID: the built-in table answers.
    assert translate("p", spec(vendor="15b3", deviceID="1019"), PFS)["devices"] == ["101a"]
    assert translate("p", spec(vendor="8086", deviceID="1592"), PFS)["devices"] == ["1889"]
    assert translate("p", spec(deviceID="1017", numVfs=0), PFS)["devices"] == ["1017"]
    assert "VF device ID of PF device beef is unknown" in refused(spec(vendor="15b3", deviceID="beef"))


def test_root_devices_and_link_type() -> None:
    got = translate("p", spec(rootDevices=["0000:04:00.0"], linkType="IB"), PFS)
    assert got == {"pfPciAddresses": ["0000:04:00.0"], "linkType": "ib"}
    assert vf_set(spec(rootDevices=["0000:04:00.0"], linkType="ib"), PFS) == {"0000:04:00.2"}
    assert vf_set(spec(rootDevices=["0000:04:00.0"], linkType="eth"), PFS) == frozenset()


@pytest.mark.parametrize(
    ("s", "complaint"),
    [
        (spec(netFilter="openstack/NetworkID:x"), "netFilter"),
        (spec(pfNames=["ens1f0#0-3"]), "'#' VF range"),
        (spec(vendor="15b3", deviceType="vfio-pci"), "vfio-pci"),
        (spec(), "would match every VF"),
        (spec(linkType="eth"), "would match every VF"),
    ],
)
def test_untranslatable_selectors_are_refused(s, complaint) -> None:
    assert complaint in refused(s)


def test_vf_sets_follow_upstream_pf_matching() -> None:
    assert vf_set(spec(vendor="15b3"), PFS) == {"0000:03:00.2", "0000:04:00.2"}
    assert vf_set(spec(vendor="8086"), PFS) == frozenset()
    assert vf_set(spec(vendor="15b3", deviceID="1019"), PFS) == {"0000:04:00.2"}
    assert vf_set(spec(pfNames=["ens1f0#0-1"]), PFS) == {"0000:03:00.2"}
    assert inventory(None) == []
