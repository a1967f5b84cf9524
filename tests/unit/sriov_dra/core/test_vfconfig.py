import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core.errors import DriverCoreError
from sriov_dra.core.vfconfig import (
    API_VERSION,
    VfConfig,
    config_applies,
    decode_vf_config,
    effective_vf_config,
)

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"


def params(**fields):
    return {"apiVersion": API_VERSION, "kind": "VfConfig", **fields}


def cfg(source, requests=None, opaque_driver=DRIVER, **fields):
    entry = {"source": source, "opaque": {"driver": opaque_driver, "parameters": params(**fields)}}
    if requests is not None:
        entry["requests"] = requests
    return entry


def test_decode_all_fields():
    got = decode_vf_config(
        params(
            driver="vfio-pci",
            addVhostMount=True,
            ifName="net5",
            netAttachDefName="a",
            netAttachDefNamespace="b",
        ),
        "x",
    )
    assert got == VfConfig("vfio-pci", True, "net5", "a", "b")


def test_decode_defaults():
    assert decode_vf_config(params(), "x") == VfConfig()


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        ([], "must be an object"),
        (params(vf={}), "unknown field"),
        ({"kind": "VfConfig"}, "apiVersion"),
        ({"apiVersion": API_VERSION, "kind": "Other"}, "apiVersion"),
        (params(ifName=1), "ifName must be a string"),
        (params(netAttachDefName=None), "netAttachDefName must be a string"),
        (params(addVhostMount="yes"), "addVhostMount"),
    ],
)
def test_decode_is_strict(parameters, fragment):
    with pytest.raises(DriverCoreError) as err:
        decode_vf_config(parameters, "claim config 0")
    assert err.value.reason == "InvalidVfConfig"
    assert fragment in err.value.message and "claim config 0" in err.value.message


def test_class_name_with_namespace_then_claim_name_alone_resets_namespace():
    configs = [
        cfg("FromClaim", netAttachDefName="B"),
        cfg("FromClass", netAttachDefName="A", netAttachDefNamespace="infra"),
    ]
    got = effective_vf_config(configs, "vf", DRIVER)
    assert (got.net_attach_def_name, got.net_attach_def_namespace) == ("B", "")


def test_namespace_only_later_config_moves_only_the_namespace():
    configs = [
        cfg("FromClass", netAttachDefName="A", netAttachDefNamespace="infra"),
        cfg("FromClaim", netAttachDefNamespace="other"),
    ]
    got = effective_vf_config(configs, "vf", DRIVER)
    assert (got.net_attach_def_name, got.net_attach_def_namespace) == ("A", "other")


def test_list_order_is_kept_within_each_source_and_claim_wins():
    configs = [
        cfg("FromClass", ifName="c1"),
        cfg("FromClass", ifName="c2", opaque_driver="other.example.com"),
        cfg("FromClass", ifName="c3"),
        cfg("FromClaim", netAttachDefName="m1"),
        cfg("FromClaim", netAttachDefName="m2"),
    ]
    got = effective_vf_config(configs, "vf", DRIVER)
    assert got.if_name == "c3" and got.net_attach_def_name == "m2"


def test_other_drivers_are_filtered_out():
    got = effective_vf_config(
        [cfg("FromClaim", opaque_driver="gpu.example.com", netAttachDefName="x")], "vf", DRIVER
    )
    assert got == VfConfig()


def test_empty_strings_do_not_override():
    configs = [
        cfg("FromClass", driver="vfio-pci", ifName="a", addVhostMount=True),
        cfg("FromClaim", driver="", ifName=""),
    ]
    got = effective_vf_config(configs, "vf", DRIVER)
    assert (got.driver, got.if_name, got.add_vhost_mount) == ("vfio-pci", "a", True)


@pytest.mark.parametrize(
    ("requests", "request_name", "applies"),
    [
        (None, "vf", True),
        ([], "vf/sub", True),
        (["vf"], "vf", True),
        (["vf"], "vf/sub", True),
        (["vf/sub"], "vf/sub", True),
        (["vf/other"], "vf/sub", False),
        (["vf/sub"], "vf", False),
        (["gpu"], "vf", False),
        (["v"], "vf", False),
    ],
)
def test_config_for_result_matching(requests, request_name, applies):
    assert config_applies(cfg("FromClaim", requests), request_name) is applies
    got = effective_vf_config([cfg("FromClaim", requests, ifName="hit")], request_name, DRIVER)
    assert (got.if_name == "hit") is applies


def test_config_without_opaque_never_applies():
    assert not config_applies({"source": "FromClaim", "requests": []}, "vf")
    assert effective_vf_config([{"source": "FromClaim", "opaque": None}], "vf", DRIVER) == VfConfig()


def test_unknown_source_is_refused():
    with pytest.raises(DriverCoreError) as err:
        effective_vf_config([{"source": "FromSomewhere", "opaque": {}}], "vf", DRIVER)
    assert err.value.reason == "InvalidVfConfig"


refs = st.builds(
    VfConfig,
    driver=st.sampled_from(["", "vfio-pci"]),
    add_vhost_mount=st.booleans(),
    if_name=st.sampled_from(["", "a"]),
    net_attach_def_name=st.sampled_from(["", "n1", "n2"]),
    net_attach_def_namespace=st.sampled_from(["", "ns1"]),
)


@given(refs, refs)
def test_override_reference_laws(base, later):
    got = base.overridden_by(later)
    if later.net_attach_def_name:
        assert (got.net_attach_def_name, got.net_attach_def_namespace) == (
            later.net_attach_def_name,
            later.net_attach_def_namespace,
        )
    else:
        assert got.net_attach_def_name == base.net_attach_def_name
        assert got.net_attach_def_namespace == (
            later.net_attach_def_namespace or base.net_attach_def_namespace
        )
    assert got.overridden_by(later) == got
