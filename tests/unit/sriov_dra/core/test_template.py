import pytest

from sriov_contract.errors import ContractError
from sriov_dra.core.errors import DriverCoreError
from sriov_dra.core.policyref import DeviceAttributesObject, merge_device_attributes
from sriov_dra.core.template import (
    NAME_ATTRIBUTE,
    NAMESPACE_ATTRIBUTE,
    NamespacedName,
    TemplateRef,
    reference_from_attributes,
    resolve_template,
)
from sriov_dra.core.vfconfig import VfConfig

POD_NS = "ai-workloads"
NO_CONFIG = VfConfig()


def attrs(name=None, namespace=None, **other):
    out = {k: {"string": v} for k, v in other.items()}
    if name is not None:
        out[NAME_ATTRIBUTE] = {"string": name}
    if namespace is not None:
        out[NAMESPACE_ATTRIBUTE] = {"string": namespace}
    return out


def resolve(device_attrs, config=NO_CONFIG):
    return resolve_template(device_attrs, config, POD_NS, "pf0vf1")


def refused(reason, device_attrs, config=NO_CONFIG):
    with pytest.raises(DriverCoreError) as err:
        resolve(device_attrs, config)
    assert err.value.reason == reason
    return err.value


@pytest.mark.parametrize(
    ("device_attrs", "config", "expected"),
    [
        (attrs("rail-a-net"), VfConfig(), (POD_NS, "rail-a-net")),
        (attrs("rail-a-net", ""), VfConfig(), (POD_NS, "rail-a-net")),
        (attrs("rail-a-net", "infra"), VfConfig(), ("infra", "rail-a-net")),
        ({}, VfConfig(net_attach_def_name="b"), (POD_NS, "b")),
        ({}, VfConfig(net_attach_def_name="b", net_attach_def_namespace="infra"), ("infra", "b")),
        (attrs(vendor="x"), VfConfig(net_attach_def_name="b"), (POD_NS, "b")),
        # Both paths name the same concrete NAD once the Pod namespace is applied.
        (attrs("a"), VfConfig(net_attach_def_name="a", net_attach_def_namespace=POD_NS), (POD_NS, "a")),
        (
            attrs("a", "infra"),
            VfConfig(net_attach_def_name="a", net_attach_def_namespace="infra"),
            ("infra", "a"),
        ),
    ],
)
def test_resolution(device_attrs, config, expected):
    assert resolve(device_attrs, config) == NamespacedName(*expected)


@pytest.mark.parametrize(
    ("device_attrs", "config"),
    [
        (attrs("a"), VfConfig(net_attach_def_name="b")),
        (attrs("a"), VfConfig(net_attach_def_name="a", net_attach_def_namespace="infra")),
        (attrs("a", "infra"), VfConfig(net_attach_def_name="a")),
    ],
)
def test_device_and_vfconfig_disagreement_is_an_error(device_attrs, config):
    err = refused("ConflictingTemplateReference", device_attrs, config)
    assert "pf0vf1" in err.message


@pytest.mark.parametrize("pod_namespace", ["", "Bad_NS"])
def test_pod_namespace_must_be_a_verified_namespace(pod_namespace):
    with pytest.raises(ContractError):
        resolve_template(attrs("a"), NO_CONFIG, pod_namespace, "pf0vf1")


def test_no_reference_is_missing_template():
    err = refused("MissingNetworkTemplate", attrs(vendor="x"))
    assert "pf0vf1" in err.message and "netAttachDefName" in err.message


@pytest.mark.parametrize(
    "device_attrs",
    [
        attrs(namespace="infra"),
        attrs(""),
        attrs("", "infra"),
        {NAME_ATTRIBUTE: "bare-string"},
        {NAME_ATTRIBUTE: {"int": 3}},
        {NAME_ATTRIBUTE: {"string": "a", "int": 3}},
        attrs("Upper"),
        attrs("a", "bad.ns"),
        attrs("a" * 65),
        attrs("a", "b" * 65),
    ],
)
def test_malformed_attribute_references_never_fall_back(device_attrs):
    # A valid VfConfig is present, but a malformed attribute must not be hidden by the fallback.
    refused("InvalidTemplateReference", device_attrs, VfConfig(net_attach_def_name="ok"))


def test_sixty_four_characters_is_the_limit_not_truncated():
    name = "a" * 64
    assert resolve(attrs(name)) == NamespacedName(POD_NS, name)
    err = refused("InvalidTemplateReference", attrs(name + "b"))
    assert "never truncated" in err.message


def test_long_names_work_through_vfconfig():
    name = "n" * 200
    assert resolve({}, VfConfig(net_attach_def_name=name)) == NamespacedName(POD_NS, name)


@pytest.mark.parametrize(
    "config",
    [VfConfig(net_attach_def_namespace="infra"), VfConfig(net_attach_def_name="Bad_Name")],
)
def test_malformed_vfconfig_reference(config):
    refused("InvalidTemplateReference", {}, config)


def test_reference_from_attributes_absent():
    assert reference_from_attributes(attrs(vendor="x"), "o") is None


def test_template_ref_text():
    assert str(TemplateRef("a")) == "<Pod namespace>/a"
    assert str(TemplateRef("a", "infra")) == "infra/a"
    assert str(NamespacedName("infra", "a")) == "infra/a"


def obj(object_name, **kw):
    return DeviceAttributesObject(object_name, attrs(**kw))


def test_merge_in_name_order_last_wins_for_ordinary_keys():
    merged = merge_device_attributes([obj("b", rail="b"), obj("a", rail="a", speed="100")])
    assert merged == {"rail": {"string": "b"}, "speed": {"string": "100"}}


def test_conflicting_references_name_both_objects():
    with pytest.raises(DriverCoreError) as err:
        merge_device_attributes([obj("zeta", name="rail-b"), obj("alpha", name="rail-a")])
    assert err.value.reason == "ConflictingTemplateReference"
    assert "alpha" in err.value.message and "zeta" in err.value.message
    assert err.value.details["objects"] == ["alpha", "zeta"]


def test_default_and_explicit_namespace_are_conservatively_rejected():
    with pytest.raises(DriverCoreError) as err:
        merge_device_attributes([obj("a", name="n"), obj("b", name="n", namespace=POD_NS)])
    assert err.value.reason == "ConflictingTemplateReference"
    assert "defaulted Pod namespace" in err.value.message


def test_different_explicit_namespaces_conflict_without_default_hint():
    with pytest.raises(DriverCoreError) as err:
        merge_device_attributes([obj("a", name="n", namespace="x"), obj("b", name="n", namespace="y")])
    assert "defaulted" not in err.value.message


def test_omitted_and_empty_namespace_agree_symbolically():
    merged = merge_device_attributes([obj("a", name="n", namespace=""), obj("b", name="n")])
    # The whole reference comes from one object: b has no namespace key, so none is merged in.
    assert merged == {NAME_ATTRIBUTE: {"string": "n"}}


def test_name_never_pairs_with_another_objects_namespace():
    with pytest.raises(DriverCoreError) as err:
        merge_device_attributes([obj("a", name="n"), obj("b", namespace="infra")])
    assert err.value.reason == "InvalidTemplateReference"
    assert "DeviceAttributes b" in err.value.message


def test_reference_from_one_object_and_ordinary_keys_from_others():
    merged = merge_device_attributes([obj("a", name="n", namespace="infra"), obj("b", speed="1")])
    assert merged == {
        NAME_ATTRIBUTE: {"string": "n"},
        NAMESPACE_ATTRIBUTE: {"string": "infra"},
        "speed": {"string": "1"},
    }


def test_no_objects():
    assert merge_device_attributes([]) == {}
