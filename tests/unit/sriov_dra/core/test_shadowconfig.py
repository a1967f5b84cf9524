import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core.errors import DriverCoreError
from sriov_dra.core.shadowconfig import render_shadow_config

PCI = "0000:03:00.1"


def nad(config, name="rail-a-net", namespace="ai-workloads", **extra_meta):
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": namespace, **extra_meta},
        "spec": {"config": config},
    }


def conflist(*plugins, name='"rail-a"', version='"1.0.0"'):
    head = f'"cniVersion":{version},' if version is not None else ""
    head += f'"name":{name},' if name is not None else ""
    return "{" + head + '"plugins":[' + ",".join(plugins) + "]}"


SRIOV = '{"type":"sriov","vlan":100,"ipam":{"type":"whereabouts","range":"192.0.2.0/24"}}'
TUNING = '{"type":"tuning","mtu":9000}'


def render(config, pci=PCI, **kw):
    return render_shadow_config(nad(config, **kw), pci)


def refused(config, reason="UnsupportedCNIConfig", pci=PCI, **kw):
    with pytest.raises(DriverCoreError) as err:
        render(config, pci, **kw)
    assert err.value.reason == reason
    return err.value


def test_conflist_render_matches_the_spec_example_byte_for_byte():
    out = render(conflist(SRIOV, TUNING, name='"ai-workloads-rail-a"'))
    assert out.config == (
        b'{"cniVersion":"1.0.0","name":"ai-workloads-rail-a","plugins":[{"type":"sriov","vlan":100,'
        b'"ipam":{"type":"whereabouts","range":"192.0.2.0/24"},"deviceID":"0000:03:00.1"},'
        b'{"type":"tuning","mtu":9000}]}'
    )
    assert out.cni_name == "ai-workloads-rail-a"
    assert out.plugin_index == 0
    assert out.plugin_type == "sriov"
    assert out.pci_address == PCI
    assert out.sha256 == hashlib.sha256(out.config).hexdigest()


def test_single_plugin_render():
    out = render('{"cniVersion":"0.4.0","type":"sriov","name":"n1"}')
    assert out.config == b'{"cniVersion":"0.4.0","type":"sriov","name":"n1","deviceID":"0000:03:00.1"}'
    assert out.plugin_index is None


@pytest.mark.parametrize("token", ["9000", "1e3", "0.50", "12345678901234567890", "-0", "1E+400"])
def test_numbers_keep_exact_text(token):
    out = render(conflist(SRIOV, '{"type":"tuning","mtu":' + token + "}"))
    assert b'"mtu":' + token.encode() + b"}" in out.config


def test_unknown_fields_and_their_order_survive():
    sriov = '{"zz":1,"type":"sriov","x-vendor":{"b":[1,{"c":null}],"a":true},"spoofchk":"off","trust":"on"}'
    out = json.loads(render(conflist(sriov)).config)
    assert list(out["plugins"][0]) == ["zz", "type", "x-vendor", "spoofchk", "trust", "deviceID"]
    assert list(out["plugins"][0]["x-vendor"]) == ["b", "a"]
    assert out["plugins"][0]["x-vendor"] == {"b": [1, {"c": None}], "a": True}


@pytest.mark.parametrize("key", ["type", "plugins", "name", "deviceID", "pciBusID", "ipam"])
def test_duplicate_critical_key_at_root_is_refused(key):
    base = (
        '{"cniVersion":"1.0.0","type":"sriov","name":"n",' if key != "plugins" else conflist(SRIOV)[:-1] + ","
    )
    config = base + f'"{key}":"x","{key}":"y"}}' if key != "plugins" else base + '"plugins":[]}'
    err = refused(config)
    assert key in err.message and "repeats" in err.message


@pytest.mark.parametrize("key", ["type", "name", "deviceID", "pciBusID", "ipam", "plugins"])
def test_duplicate_critical_key_in_the_sriov_plugin_is_refused(key):
    err = refused(conflist(f'{{"type":"sriov","{key}":"a","{key}":"b"}}'))
    assert "plugins[0] repeats" in err.message


def test_duplicate_non_critical_keys_are_not_refused():
    out = render(conflist('{"type":"sriov","vlan":1,"vlan":2}'))
    assert b'"vlan":2' in out.config


def test_duplicate_in_a_metaplugin_is_not_our_concern():
    render(conflist(SRIOV, '{"type":"tuning","name":"a","name":"b"}'))


@pytest.mark.parametrize("config", ["null", "[]", '"x"', "1", "true"])
def test_non_object_roots_are_refused(config):
    assert "JSON object" in refused(config).message


@pytest.mark.parametrize("config", ["", None, "{"])
def test_empty_file_backed_or_malformed(config):
    refused(config)


def test_missing_spec_is_file_backed():
    with pytest.raises(DriverCoreError) as err:
        render_shadow_config({"metadata": {"name": "n"}}, PCI)
    assert err.value.reason == "UnsupportedCNIConfig"
    assert "file-backed" in err.value.message


@pytest.mark.parametrize(
    "source", [{"metadata": "x", "spec": {"config": "{}"}}, {"metadata": {"name": "n"}, "spec": []}]
)
def test_non_object_metadata_or_spec_is_refused_not_crashed(source):
    with pytest.raises(DriverCoreError) as err:
        render_shadow_config(source, PCI)
    assert err.value.reason == "UnsupportedCNIConfig"


def test_missing_metadata_name_is_refused():
    with pytest.raises(DriverCoreError) as err:
        render_shadow_config({"spec": {"config": conflist(SRIOV)}}, PCI)
    assert err.value.reason == "UnsupportedCNIConfig"


def test_root_with_type_and_plugins_is_ambiguous():
    config = '{"cniVersion":"1.0.0","name":"n","type":"sriov","plugins":[' + SRIOV + "]}"
    assert "both type and plugins" in refused(config).message


@pytest.mark.parametrize("name", [None, '""'])
def test_name_is_materialized_from_source_metadata(name):
    out = render(conflist(SRIOV, name=name), name="rail-b-net")
    assert out.cni_name == "rail-b-net"
    assert json.loads(out.config)["name"] == "rail-b-net"


def test_existing_name_is_kept_and_never_replaced_by_metadata():
    out = render(conflist(SRIOV, name='"keep-me"'), name="dra-sriov-0123456789abcdef0123456789abcdef")
    assert out.cni_name == "keep-me"


@pytest.mark.parametrize("name", ["1", '"-bad"', '"a b"'])
def test_invalid_cni_name_is_refused(name):
    refused(conflist(SRIOV, name=name))


@pytest.mark.parametrize("plugin_type", ['"bridge"', '"macvlan"', "1", None, '"tuning"'])
def test_single_plugin_must_be_sriov(plugin_type):
    t = f'"type":{plugin_type},' if plugin_type else ""
    refused('{"cniVersion":"1.0.0",' + t + '"name":"n"}')


@pytest.mark.parametrize(
    ("plugins", "fragment"),
    [
        ([TUNING, SRIOV], "plugins[0]"),
        ([SRIOV, SRIOV], "second sriov"),
        ([SRIOV, '{"type":"multus"}'], "nested delegating"),
        ([SRIOV, '{"type":"host-device"}'], "device-creating"),
        ([SRIOV, '{"type":"macvlan"}'], "device-creating"),
        ([SRIOV, '{"type":"bridge"}'], "device-creating"),
        ([SRIOV, '{"type":"bond"}'], "device-creating"),
        ([SRIOV, '{"type":"portmap"}'], "not an allowed metaplugin"),
        ([SRIOV, '{"mtu":1}'], "not an allowed metaplugin"),
        ([SRIOV, "1"], "not an object"),
        ([SRIOV, '{"type":2}'], "must be a string"),
        ([], "non-empty"),
    ],
)
def test_conflist_shape(plugins, fragment):
    assert fragment in refused(conflist(*plugins)).message


def test_plugins_not_a_list():
    refused('{"cniVersion":"1.0.0","name":"n","plugins":{}}')


@pytest.mark.parametrize("allocated", ["0000:03:00.1", "0000:03:00.1".upper()])
def test_pci_is_normalized_and_injected_only_into_sriov(allocated):
    out = json.loads(render(conflist('{"type":"sriov"}', TUNING), pci=allocated).config)
    assert out["plugins"][0]["deviceID"] == PCI
    assert "deviceID" not in out["plugins"][1] and "pciBusID" not in out["plugins"][1]
    assert "deviceID" not in out and "pciBusID" not in out["plugins"][0]


@pytest.mark.parametrize("allocated", ["pci:0000:03:00.1", "03:00.1", "0000:03:20.1", "0000:03:00.8", ""])
def test_invalid_allocated_pci(allocated):
    refused(conflist(SRIOV), reason="InvalidPCIAddress", pci=allocated)


@pytest.mark.parametrize("key", ["deviceID", "pciBusID"])
def test_preexisting_different_pci_is_refused(key):
    err = refused(conflist(f'{{"type":"sriov","{key}":"0000:04:00.1"}}'), reason="PCIAddressMismatch")
    assert "0000:04:00.1" in err.message and PCI in err.message


@pytest.mark.parametrize("key", ["deviceID", "pciBusID"])
def test_preexisting_same_pci_is_accepted_and_normalized(key):
    out = json.loads(
        render(conflist(f'{{"type":"sriov","{key}":"0000:AF:00.1"}}'), pci="0000:af:00.1").config
    )
    assert out["plugins"][0][key] == "0000:af:00.1"


def test_pcibusid_is_kept_in_step_when_present_and_empty():
    out = json.loads(render(conflist('{"type":"sriov","deviceID":"","pciBusID":""}')).config)
    assert out["plugins"][0]["deviceID"] == PCI and out["plugins"][0]["pciBusID"] == PCI


def test_wrong_type_deviceid_is_refused():
    refused(conflist('{"type":"sriov","deviceID":3}'))


@pytest.mark.parametrize(
    "ipam",
    [
        '{"type":"whereabouts","range":"10.0.0.0/24"}',
        '{"type":"whereabouts","range":"10.0.0.0/24","network_name":""}',
        '{"type":"whereabouts","range":"10.0.0.0/24","network_name":"rail-a"}',
        '{"type":"whereabouts","node_slice_size":""}',
        '{"type":"host-local","ranges":[[{"subnet":"10.0.0.0/24"}]],"dataDir":"/x"}',
    ],
)
def test_ipam_subtree_is_byte_faithful(ipam):
    out = render(conflist('{"type":"sriov","ipam":' + ipam + "}"))
    assert b'"ipam":' + ipam.encode() + b"," in out.config


@pytest.mark.parametrize("value", ['"/28"', "28", "true"])
def test_enabled_node_slice_is_refused(value):
    err = refused(conflist('{"type":"sriov","ipam":{"type":"whereabouts","node_slice_size":' + value + "}}"))
    assert "node_slice_size" in err.message


def test_ipam_must_be_an_object():
    refused(conflist('{"type":"sriov","ipam":"host-local"}'))


@pytest.mark.parametrize("version", [None, '""', '"0.2.0"', '"2.0.0"', "1"])
def test_cni_version_must_be_supported(version):
    refused(conflist(SRIOV, version=version))


@pytest.mark.parametrize("version", ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"])
def test_supported_cni_versions(version):
    render(conflist(SRIOV, version=f'"{version}"'))


def test_resource_name_annotation_is_never_carried_over():
    source = nad(conflist(SRIOV), annotations={"k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov"})
    out = render_shadow_config(source, PCI)
    assert b"resourceName" not in out.config
    assert not hasattr(out, "annotations")


def test_source_is_not_mutated():
    source = nad(conflist(SRIOV, name=None))
    before = json.dumps(source, sort_keys=True)
    render_shadow_config(source, PCI)
    assert json.dumps(source, sort_keys=True) == before


pcis = st.builds(
    "{:04x}:{:02x}:{:02x}.{}".format,
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFF),
    st.integers(0, 0x1F),
    st.integers(0, 7),
)
extras = st.dictionaries(
    st.sampled_from(["vlan", "trust", "x-a", "mtu", "spoofchk", "logLevel"]),
    st.one_of(
        st.integers(), st.text(max_size=5), st.booleans(), st.floats(allow_nan=False, allow_infinity=False)
    ),
    max_size=4,
)


@given(pcis, extras, st.booleans(), st.sampled_from([None, '""', '"named"']))
def test_render_is_deterministic_and_a_fixed_point(pci, extra, with_tuning, name):
    sriov = json.dumps({"type": "sriov", **extra})
    config = conflist(sriov, TUNING, name=name) if with_tuning else conflist(sriov, name=name)
    first = render(config, pci=pci)
    assert render(config, pci=pci) == first
    again = render(first.config.decode(), pci=pci)
    assert again == first
    assert json.loads(first.config)["plugins"][0]["deviceID"] == pci
