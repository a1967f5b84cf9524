"""Delegate loading as Multus does it: NAD bytes, confDir files, cluster networks, ifnames."""

from __future__ import annotations

import json

import pytest

from cni_shim.core import delegates, network
from cni_shim.core.delegates import Candidate
from cni_shim.errors import CniError
from cni_shim.node.conffiles import NodeConfFiles
from sriov_contract.networks import parse_network_selections

FILES = NodeConfFiles()


def _nad(name, config):
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"config": config}}


def test_inline_config_keeps_exact_bytes_when_it_has_a_name():
    raw = '{"name":"x", "type":"macvlan",  "mtu": 1.50}'
    assert delegates.nad_network(_nad("n", raw), "/nonexistent", FILES, "test").raw == raw.encode()


@pytest.mark.parametrize("config", ['{"type":"macvlan"}', '{"name":"","type":"macvlan"}'])
def test_missing_or_empty_name_is_filled_from_metadata(config):
    out = json.loads(delegates.nad_network(_nad("meta-name", config), "/nonexistent", FILES, "test").raw)
    assert out == {"name": "meta-name", "type": "macvlan"}


def test_empty_config_is_looked_up_by_nad_name_in_confdir(tmp_path):
    (tmp_path / "01-other.conf").write_text(json.dumps({"name": "other", "type": "bridge"}))
    (tmp_path / "02-mine.conflist").write_text(json.dumps({"name": "mine", "plugins": [{"type": "ptp"}]}))
    mine = delegates.nad_network(_nad("mine", ""), str(tmp_path), FILES, "test")
    assert json.loads(mine.raw)["plugins"] == [{"type": "ptp"}]
    with pytest.raises(CniError, match="no network available in the name absent"):
        delegates.nad_network(_nad("absent", ""), str(tmp_path), FILES, "test")
    with pytest.raises(CniError, match="No networks found"):
        delegates.nad_network(_nad("mine", ""), str(tmp_path / "missing"), FILES, "test")


def test_the_first_broken_file_aborts_the_confdir_search(tmp_path):
    (tmp_path / "01-broken.conf").write_text("{")
    (tmp_path / "02-mine.conf").write_text(json.dumps({"name": "mine", "type": "ptp"}))
    with pytest.raises(CniError, match=r"01-broken\.conf"):
        delegates.find_in_dir("mine", str(tmp_path), FILES)


def test_cni_args_merge_into_every_plugin_of_a_conflist():
    sel = parse_network_selections('[{"name":"n","cni-args":{"a":1,"b":"x"}}]', "ns")[0]
    conflist = b'{"name":"l","plugins":[{"type":"p1","args":{"cni":{"a":0,"keep":true}}},{"type":"p2"}]}'
    cand = delegates.load(conflist, sel, "test")
    plugins = json.loads(cand.network.raw)["plugins"]
    assert plugins[0]["args"]["cni"] == {"a": 1, "b": "x", "keep": True}
    assert plugins[1]["args"] == {"cni": {"a": 1, "b": "x"}}
    assert cand.name == "ns/n"


def test_cluster_network_paths_resolve_files_and_directories(tmp_path):
    (tmp_path / "10-a.conflist").write_text(json.dumps({"name": "lista", "plugins": [{"type": "ptp"}]}))
    (tmp_path / "20-b.conf").write_text(json.dumps({"name": "b", "type": "bridge"}))
    assert delegates.resolve_network(str(tmp_path), "kube-system", "/none", None, FILES).name == "lista"
    assert (
        delegates.resolve_network(str(tmp_path / "20-b.conf"), "kube-system", "/none", None, FILES).name
        == "b"
    )
    assert delegates.resolve_network("b", "kube-system", str(tmp_path), lambda ns, n: None, FILES).name == "b"
    with pytest.raises(CniError, match="cannot find network: zzz"):
        delegates.resolve_network("zzz", "kube-system", str(tmp_path), lambda ns, n: None, FILES)


def test_cluster_network_prefers_a_nad_in_the_multus_namespace(tmp_path):
    nad = _nad("net", '{"type":"macvlan"}')
    cand = delegates.resolve_network(
        "net", "kube-system", str(tmp_path), lambda ns, n: nad if ns == "kube-system" else None, FILES
    )
    assert cand.name == "kube-system/net"


NET = network.parse(b'{"name":"x","type":"t"}', "test")


def _cands(annotation, master=True):
    sels = parse_network_selections(annotation, "ns")
    return [Candidate("cluster", NET, master=master)] + [
        Candidate(f"{s.namespace}/{s.name}", NET, selection=s) for s in sels
    ]


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        ("a@macvlan1, b", ["eth0", "macvlan1", "net2"]),  # Multus docs: indices are not compacted
        ("a,b,c", ["eth0", "net1", "net2", "net3"]),
        ('[{"name":"a","interface":"x1"},{"name":"b"}]', ["eth0", "x1", "net2"]),
        ("other/a@my_Interface", ["eth0", "my_Interface"]),
    ],
)
def test_multus_ifname_rules(annotation, expected):
    assert delegates.ifnames(_cands(annotation), "eth0") == expected


@pytest.mark.parametrize(
    ("annotation", "reason"), [("a@net2,b", "InterfaceNameCollision"), ("a@eth0", "InterfaceNameCollision")]
)
def test_collisions_over_the_whole_list(annotation, reason):
    with pytest.raises(CniError) as err:
        delegates.ifnames(_cands(annotation), "eth0")
    assert err.value.reason == reason


def test_isolation_allows_global_namespaces_only():
    sels = parse_network_selections("default/a,ns/b,other/c", "ns")
    delegates.check_isolation(sels[:2], "ns", ("default",))
    with pytest.raises(CniError, match="refers to target namespace other"):
        delegates.check_isolation(sels, "ns", ("default",))


def test_ecmp_default_routes_are_refused():
    sels = parse_network_selections(
        '[{"name":"a","default-route":["10.0.0.1"]},{"name":"b","default-route":["10.1.0.1"]}]', "ns"
    )
    with pytest.raises(CniError, match="ECMP"):
        delegates.check_default_routes([Candidate("x", NET, selection=s) for s in sels])


def test_capability_args_override_only_for_non_master_and_add_devinfo_path():
    sel = parse_network_selections(
        '[{"name":"sriov","deviceID":"0000:03:00.1","bandwidth":{"ingressRate":1},'
        '"infiniband-guid":"c2:11:22:33:44:55:66:77","mac":"02:00:00:00:00:01"}]',
        "test",
    )[0]
    runtime = {"portMappings": [{"hostPort": 80, "containerPort": 8080}]}
    caps = delegates.capability_args(Candidate("test/sriov", NET, selection=sel), runtime, "cid", "net1")
    assert caps["deviceID"] == "0000:03:00.1"
    assert caps["CNIDeviceInfoFile"] == "/var/run/k8s.cni.cncf.io/devinfo/cni/test-sriov-cid_net1"
    assert caps["bandwidth"] == {"ingressRate": 1, "ingressBurst": 0, "egressRate": 0, "egressBurst": 0}
    assert caps["portMappings"] == runtime["portMappings"]
    assert caps["infinibandGUID"] == "c2:11:22:33:44:55:66:77" and caps["mac"] == "02:00:00:00:00:01"
    master = delegates.capability_args(
        Candidate("m", NET, master=True, selection=sel), runtime, "cid", "eth0"
    )
    assert master == runtime
