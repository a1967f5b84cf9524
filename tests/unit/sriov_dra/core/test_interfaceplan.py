import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_contract.errors import ContractError
from sriov_dra.core.errors import DriverCoreError
from sriov_dra.core.interfaceplan import AllocatedDevice, canonical_aliases, plan_interfaces
from sriov_dra.core.template import NamespacedName

NODE = "00000000-0000-0000-0000-00000000000a"
POD = "00000000-0000-0000-0000-00000000000b"
CLAIM_A = "00000000-0000-0000-0000-0000000000c1"
CLAIM_B = "00000000-0000-0000-0000-0000000000c2"
DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"
RAIL_A = NamespacedName("ai", "rail-a-net")
RAIL_B = NamespacedName("ai", "rail-b-net")
ALIASES = {CLAIM_A: "nics", CLAIM_B: "extra"}


def dev(claim, request, device, vf, template=RAIL_A, **kw):
    return AllocatedDevice(claim, request, "node-a", device, f"0000:03:00.{vf}", template, **kw)


def plan(devices, aliases=ALIASES, **kw):
    return plan_interfaces(
        node_uid=NODE, pod_uid=POD, driver=DRIVER, claim_aliases=aliases, devices=devices, **kw
    )


def refused(reason, devices, **kw):
    with pytest.raises(DriverCoreError) as err:
        plan(devices, **kw)
    assert err.value.reason == reason
    return err.value


def test_numbering_follows_alias_request_pool_device():
    devices = [
        dev(CLAIM_A, "vf", "pf0vf2", 2),
        dev(CLAIM_A, "vf", "pf0vf1", 1),
        dev(CLAIM_B, "z", "pf0vf3", 3),
        dev(CLAIM_A, "a", "pf0vf4", 4),
    ]
    got = plan(devices)
    # Claim B's alias "extra" sorts before "nics"; within nics, request "a" before "vf".
    assert [(p.identity.device, p.interface) for p in got] == [
        ("pf0vf3", "dra0"),
        ("pf0vf4", "dra1"),
        ("pf0vf1", "dra2"),
        ("pf0vf2", "dra3"),
    ]
    assert [p.claim_alias for p in got] == ["extra", "nics", "nics", "nics"]


def test_pool_orders_before_device():
    devices = [
        AllocatedDevice(CLAIM_A, "vf", "pool-b", "d0", "0000:03:00.1", RAIL_A),
        AllocatedDevice(CLAIM_A, "vf", "pool-a", "d9", "0000:03:00.2", RAIL_A),
    ]
    assert [p.identity.pool for p in plan(devices)] == ["pool-a", "pool-b"]


def test_lexically_first_alias_is_canonical():
    aliases = canonical_aliases([("zz", CLAIM_A), ("bb", CLAIM_B), ("aa", CLAIM_A)])
    assert aliases == {CLAIM_A: "aa", CLAIM_B: "bb"}
    got = plan([dev(CLAIM_B, "vf", "d1", 1), dev(CLAIM_A, "vf", "d2", 2)], aliases=aliases)
    assert [p.identity.claim_uid for p in got] == [CLAIM_A, CLAIM_B]


def test_identity_uses_the_full_tuple():
    (p,) = plan([dev(CLAIM_A, "vf", "pf0vf1", 1)])
    assert (p.identity.node_uid, p.identity.pod_uid, p.identity.claim_uid) == (NODE, POD, CLAIM_A)
    assert (p.identity.driver, p.identity.pool, p.identity.device) == (DRIVER, "node-a", "pf0vf1")
    assert p.identity.shadow_name().startswith("dra-sriov-")


def test_same_device_under_two_requests_is_deduplicated_when_requirements_agree():
    got = plan(
        [dev(CLAIM_A, "vf-b", "pf0vf1", 1), dev(CLAIM_A, "vf-a", "pf0vf1", 1), dev(CLAIM_A, "x", "d2", 2)]
    )
    assert len(got) == 2
    assert got[0].requests == ("vf-a", "vf-b") and got[0].interface == "dra0"
    assert got[1].interface == "dra1"


@pytest.mark.parametrize(
    "other",
    [
        {"template": RAIL_B},
        {"interface": "net7"},
        {"vf_driver": "vfio-pci"},
    ],
)
def test_same_device_with_disagreeing_requirements_is_refused(other):
    err = refused(
        "ConflictingDeviceRequirements",
        [dev(CLAIM_A, "a", "pf0vf1", 1), dev(CLAIM_A, "b", "pf0vf1", 1, **other)],
    )
    assert "pf0vf1" in err.message


def test_distinct_claims_resolving_to_the_same_pci_are_an_error():
    err = refused("DuplicatePCIAddress", [dev(CLAIM_A, "vf", "pf0vf1", 1), dev(CLAIM_B, "vf", "pf0vf1", 1)])
    assert CLAIM_A in err.message and CLAIM_B in err.message


def test_two_devices_with_the_same_pci_in_one_claim_are_an_error():
    refused("DuplicatePCIAddress", [dev(CLAIM_A, "vf", "d1", 1), dev(CLAIM_A, "vf", "d2", 1)])


def test_explicit_names_are_kept():
    got = plan([dev(CLAIM_A, "vf", "d1", 1, interface="rail_a"), dev(CLAIM_A, "vf", "d2", 2)])
    assert [p.interface for p in got] == ["rail_a", "dra1"]


@pytest.mark.parametrize("name", ["a" * 16, "a/b", "a b", ".", "x:y", "é" * 8])
def test_invalid_explicit_names(name):
    refused("InvalidInterfaceName", [dev(CLAIM_A, "vf", "d1", 1, interface=name)])


def test_fifteen_bytes_is_allowed():
    (p,) = plan([dev(CLAIM_A, "vf", "d1", 1, interface="a" * 15)])
    assert p.interface == "a" * 15


def test_primary_interface_is_refused():
    refused("InvalidInterfaceName", [dev(CLAIM_A, "vf", "d1", 1, interface="eth0")])
    refused("InvalidInterfaceName", [dev(CLAIM_A, "vf", "d1", 1, interface="net0")], primary_interface="net0")


def test_shared_explicit_name_on_a_count_two_request_is_ambiguous():
    err = refused(
        "DuplicateInterfaceName",
        [dev(CLAIM_A, "vf", "d1", 1, interface="rail"), dev(CLAIM_A, "vf", "d2", 2, interface="rail")],
    )
    assert "ambiguous" in err.message


def test_repeated_explicit_name_across_claims():
    err = refused(
        "DuplicateInterfaceName",
        [dev(CLAIM_A, "vf", "d1", 1, interface="rail"), dev(CLAIM_B, "vf", "d2", 2, interface="rail")],
    )
    assert "ambiguous" not in err.message


def test_explicit_name_colliding_with_a_generated_one():
    refused(
        "DuplicateInterfaceName", [dev(CLAIM_A, "a", "d1", 1), dev(CLAIM_A, "b", "d2", 2, interface="dra0")]
    )


def test_device_of_unreferenced_claim():
    refused("ClaimNotReferencedByPod", [dev("00000000-0000-0000-0000-0000000000ff", "vf", "d1", 1)])


def test_invalid_pci_is_refused():
    with pytest.raises(DriverCoreError) as err:
        plan([AllocatedDevice(CLAIM_A, "vf", "p", "d", "pci:0000:03:00.1", RAIL_A)])
    assert err.value.reason == "InvalidPCIAddress"


def test_invalid_identity_fields_surface_as_contract_errors():
    with pytest.raises(ContractError):
        plan_interfaces(
            node_uid="nope",
            pod_uid=POD,
            driver=DRIVER,
            claim_aliases=ALIASES,
            devices=[dev(CLAIM_A, "v", "d", 1)],
        )


@given(
    st.permutations([dev(CLAIM_A, "vf", f"pf0vf{i}", i) for i in range(5)] + [dev(CLAIM_B, "g", "pf1vf0", 7)])
)
def test_plan_is_independent_of_input_order(devices):
    got = plan(devices)
    assert [(p.identity.device, p.interface) for p in got] == [
        ("pf1vf0", "dra0"),
        *[(f"pf0vf{i}", f"dra{i + 1}") for i in range(5)],
    ]
