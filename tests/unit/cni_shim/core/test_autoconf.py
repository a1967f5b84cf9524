"""Multus thick's generated 00-multus.conf, as pure data (pkg/server/config generator/manager tests)."""

from __future__ import annotations

import json

import pytest

from cni_shim.core import autoconf
from sriov_contract.errors import ReasonedError

PRIMARY = {"cniVersion": "0.4.0", "name": "primary-net", "type": "flannel"}


def _conf(**keys):
    return autoconf.settings({"cniVersion": "0.4.0", "multusAutoconfigDir": "/auto", **keys})


def test_minimal_output_is_exactly_multus_text():
    conf = _conf()
    text = autoconf.generate(conf, autoconf.cluster_network(conf, "10-flannel.conf"), PRIMARY)
    assert text == (
        '{"cniVersion":"0.4.0","name":"multus-cni-network","clusterNetwork":"/auto/10-flannel.conf","type":"multus-shim"}'
    )


def test_settings_defaults_case_folding_and_nulls():
    conf = autoconf.settings({"CNIVERSION": "1.0.0", "type": None, "multusautoconfigdir": "/a/", "other": 1})
    assert conf.auto and conf.get("type") == "multus-shim" and conf.get("cniVersion") == "1.0.0"
    assert conf.config_dir == "/etc/cni/net.d"
    assert conf.output_path == "/etc/cni/net.d/00-multus.conf"
    assert autoconf.cluster_network(conf, "10-x.conf") == "/a/10-x.conf"
    assert conf.readiness_file == ""
    assert not autoconf.settings({"multusConfigFile": "/etc/x.conf"}).auto
    assert autoconf.settings({"name": "mine"}).get("name") == "multus-cni-network"  # always forced


def test_every_key_in_struct_order_daemon_keys_cleared():
    conf = _conf(
        binDir="/opt/cni/bin",
        capabilities={"bandwidth": False},
        logFile="/var/log/m.log",
        logLevel="verbose",
        logToStderr=True,
        logOptions={"maxAge": 5, "Compress": True, "maxSize": None},
        clusterNetwork="ignored",
        namespaceIsolation=True,
        globalNamespaces="a,b",
        readinessindicatorfile="/r",
        type="cni-shim",
        cniDir="/var/lib/cni/multus",
        cniConfigDir="/host/etc/cni/net.d",
        auxiliaryCNIChainName="chain",
        daemonSocketDir="/run/x/",
        multusConfigFile="auto",
        multusMasterCNI="10-x.conf",
        forceCNIVersion=True,
        overrideNetworkName=False,
        socketDir="/host/run/multus/",  # a server key: not in the generated file
    )
    out = json.loads(
        autoconf.generate(conf, "/auto/10-x.conf", {**PRIMARY, "capabilities": {"portMappings": True}})
    )
    assert list(out) == [
        "binDir",
        "capabilities",
        "cniVersion",
        "logFile",
        "logLevel",
        "logToStderr",
        "logOptions",
        "name",
        "clusterNetwork",
        "namespaceIsolation",
        "globalNamespaces",
        "type",
        "cniDir",
        "auxiliaryCNIChainName",
        "daemonSocketDir",
    ]
    assert out["capabilities"] == {"bandwidth": False, "portMappings": True}
    assert out["logOptions"] == {"maxAge": 5, "compress": True}
    assert out["clusterNetwork"] == "/auto/10-x.conf"
    assert out["type"] == "cni-shim"


@pytest.mark.parametrize(
    ("primary", "caps"),
    [
        ({**PRIMARY, "capabilities": {"portMappings": True}}, {"portMappings": True}),
        (
            {**PRIMARY, "capabilities": {"portMappings": True, "bandwidth": False, "mac": True}},
            {"mac": True, "portMappings": True},
        ),
        (
            {
                "cniVersion": "0.4.0",
                "name": "n",
                "plugins": [
                    {"type": "a", "capabilities": {"portMappings": True}},
                    {"type": "b", "capabilities": {"bandwidth": True, "mac": False}},
                    "junk",
                ],
            },
            {"bandwidth": True, "portMappings": True},
        ),
        # An empty plugin list falls back to the top level, as Multus's len(pluginsList) > 0 test does.
        ({**PRIMARY, "plugins": [], "capabilities": {"ips": True}}, {"ips": True}),
        ({**PRIMARY, "capabilities": {"odd": "yes"}}, None),
        ({**PRIMARY, "capabilities": "nope"}, None),
    ],
)
def test_capabilities_are_the_union_of_what_the_primary_enables(primary, caps):
    out = json.loads(autoconf.generate(_conf(), "/auto/p", primary))
    assert out.get("capabilities") == caps
    assert list(out.get("capabilities") or {}) == sorted(out.get("capabilities") or {})  # Go sorts map keys


def test_override_network_name_takes_the_primarys():
    assert (
        json.loads(autoconf.generate(_conf(overrideNetworkName=True), "/auto/p", PRIMARY))["name"]
        == "primary-net"
    )
    with pytest.raises(ReasonedError, match="failed to access delegate CNI plugin name"):
        autoconf.generate(_conf(overrideNetworkName=True), "/auto/p", {"cniVersion": "0.4.0"})
    with pytest.raises(ReasonedError, match="does not feature the network name"):
        autoconf.network_name({"name": ""})


@pytest.mark.parametrize(
    ("top", "primary", "error"),
    [
        (
            "0.4.0",
            {"cniVersion": "0.3.1"},
            "delegate cni version is 0.3.1 while top level cni version is 0.4.0",
        ),
        (
            "1.0.0",
            {"cniVersion": "0.2.0"},
            "delegate cni version is 0.2.0 while top level cni version is 1.0.0",
        ),
        ("0.4.0", {"cniVersion": "0.4.0"}, None),
        ("1.0.0", {"cniVersion": "1.1.0"}, None),
        ("0.3.1", {"cniVersion": "0.1.0"}, None),  # a top level below 0.4.0 checks nothing
        ("", PRIMARY, "couldn't get top level cni version"),
        ("1.0", PRIMARY, "couldn't get top level cni version"),
        ("0.4.0", {"name": "x"}, "couldn't get cni version of delegate"),
        ("0.4.0", ["not", "an", "object"], "couldn't get cni version of delegate"),
        ("0.4.0", {"cniVersion": "01.0.0"}, "invalid semantic version '01.0.0' of delegate"),
    ],
)
def test_version_compatibility(top, primary, error):
    conf = autoconf.settings({"cniVersion": top} if top else {})
    if error is None:
        autoconf.check_version(conf, primary)
        return
    with pytest.raises(ReasonedError) as err:
        autoconf.check_version(conf, primary)
    assert err.value.reason == "AutoconfFailed"
    assert (
        err.value.message
        == f"failed to load the primary CNI configuration as a multus delegate with error '{error}'"
    )


def test_primary_is_the_first_conf_by_name_not_ours():
    assert (
        autoconf.primary_name(
            ["20-b.conflist", "10-a.conf", "00-multus.conf", "05-x.json", "00-multus.conflist", "a.conf.bak"]
        )
        == "10-a.conf"
    )
    assert autoconf.primary_name(["00-multus.conf", "readme"]) is None
    assert autoconf.primary_name(["00-auto-sriov.conf", "10-a.conf"]) == "00-auto-sriov.conf"


def test_load_primary_and_bad_json():
    assert autoconf.load_primary(b'{"a":1}', "/p") == {"a": 1}
    with pytest.raises(
        ReasonedError, match="failed to access the primary CNI configuration from /p: failed to unmarshall"
    ):
        autoconf.load_primary(b"{", "/p")


def test_force_version_rewrites_the_primary_as_go_marshals_it():
    data = b'{"type":"flannel","cniVersion":"0.3.1","name":"n","delegate":{"z":1,"a":"<&>"}}'
    assert autoconf.force_version(data, "1.0.0", "/p") == (
        b'{"cniVersion":"1.0.0","delegate":{"a":"\\u003c\\u0026\\u003e","z":1},"name":"n","type":"flannel"}'
    )
    with pytest.raises(ReasonedError, match="not a JSON object"):
        autoconf.force_version(b"[]", "1.0.0", "/p")


def test_go_json_escapes_as_encoding_json():
    assert autoconf.go_json({"b": 'a<b>&"\\\n\r\t\x08\x0c\u2028\u2029é', "a": [1, True, None, 1.5]}) == (
        '{"a":[1,true,null,1.5],"b":"a\\u003cb\\u003e\\u0026\\"\\\\\\n\\r\\t\\u0008\\u000c\\u2028\\u2029é"}'
    )


@pytest.mark.parametrize(
    "raw",
    [
        {"binDir": 1},
        {"logToStderr": "yes"},
        {"capabilities": {"a": 1}},
        {"logOptions": []},
        {"logOptions": {"maxAge": "5"}},
        {"logOptions": {"maxAge": True}},
    ],
)
def test_a_wrongly_typed_key_is_multus_unmarshal_error(raw):
    with pytest.raises(ReasonedError, match="failed to unmarshall the daemon configuration") as err:
        autoconf.settings(raw)
    assert err.value.reason == "DaemonConfigMalformed"
