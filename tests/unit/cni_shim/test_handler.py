"""The shim core against fake adapters: delegate order, cache-before-exec, rollback, DEL, GC, status."""

from __future__ import annotations

import base64
import json

import pytest

from cni_shim.errors import ApiError, CniError
from cni_shim.node.execution import plugin_failure

NETWORKS = "k8s.v1.cni.cncf.io/networks"


def _nad_conf(name: str, plugin: str = "macvlan", **extra):
    return {"cniVersion": "1.0.0", "name": name, "type": plugin, **extra}


def test_add_runs_cluster_then_annotation_in_order_with_multus_ifnames(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a@macvlan1, net-b"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    out = shim.run("ADD", shim.conf())
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [
        ("ptp", "ADD", "eth0"),
        ("plug-a", "ADD", "macvlan1"),
        ("plug-b", "ADD", "net2"),
    ]
    assert out.json["cniVersion"] == "1.0.0"
    assert out.json["interfaces"][0]["name"] == "eth0"


def test_delegate_cache_is_on_disk_before_the_first_delegate_runs(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    seen = []
    shim.executor.on_call = lambda plugin, command: seen.append(shim.plan_doc() is not None)
    assert shim.run("ADD", shim.conf()).status == 0
    assert seen == [True]
    doc = shim.plan_doc()
    assert doc["kind"] == "cniShimDelegatesV1"
    assert [d["ifname"] for d in doc["delegates"]] == ["eth0"]


def test_failed_add_rolls_back_in_reverse_including_the_failing_delegate(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a,net-b"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    shim.executor.failures[("plug-b", "ADD")] = CniError("DelegateFailed", "no VF", 11)
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert out.json["code"] == 999  # Multus wraps the delegate's error untyped
    assert 'error adding container to network "b"' in out.json["msg"]
    assert shim.executor.commands() == [
        ("ptp", "ADD", "eth0"),
        ("plug-a", "ADD", "net1"),
        ("plug-b", "ADD", "net2"),
        ("plug-b", "DEL", "net2"),
        ("plug-a", "DEL", "net1"),
        ("ptp", "DEL", "eth0"),
    ]
    # everything is detached: the cache stays but the runtime's DEL has nothing left to repeat
    assert shim.plan_doc()["delegates"] == []
    shim.executor.calls.clear()
    assert shim.run("DEL", shim.conf()).status == 0
    assert shim.executor.calls == []
    assert shim.plan_doc() is None


def test_rollback_keeps_attached_delegates_whose_del_failed(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    shim.executor.failures[("plug-a", "ADD")] = CniError("DelegateFailed", "boom", 999)
    shim.executor.failures[("plug-a", "DEL")] = CniError("DelegateFailed", "nothing to delete", 999)
    shim.executor.failures[("ptp", "DEL")] = CniError("DelegateFailed", "busy", 11)
    assert shim.run("ADD", shim.conf()).status == 1
    assert [d["name"] for d in shim.plan_doc()["delegates"]] == ["cluster"]


def test_del_uses_the_cache_in_reverse_and_reads_nothing(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a", vendorKey={"deep": 12345678901234567890}))
    assert shim.run("ADD", shim.conf()).status == 0
    shim.kube.pods.clear()
    shim.kube.nads.clear()
    shim.kube.reads.clear()
    shim.executor.calls.clear()
    out = shim.run("DEL", shim.conf())
    assert out.status == 0, out.stdout
    assert shim.kube.reads == []
    assert shim.executor.commands() == [("plug-a", "DEL", "net1"), ("ptp", "DEL", "eth0")]
    # lossless: the vendor key keeps its exact number into teardown
    assert shim.executor.calls[0].stdin["vendorKey"]["deep"] == 12345678901234567890
    # prevResult is the delegate's own cached result
    assert shim.executor.calls[0].stdin["prevResult"]["interfaces"][0]["name"] == "net1"
    assert shim.plan_doc() is None


def test_del_without_cache_and_without_pod_succeeds_with_a_warning(shim):
    out = shim.run("DEL", shim.conf())
    assert out.status == 0
    assert shim.executor.calls == []
    assert any(level == "warning" and "cannot properly delete" in msg for level, msg in shim.log.lines)


def test_del_without_cache_rebuilds_from_the_live_pod(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    out = shim.run("DEL", shim.conf())
    assert out.status == 0
    assert shim.executor.commands() == [("plug-a", "DEL", "net1"), ("ptp", "DEL", "eth0")]


@pytest.mark.parametrize(("retry", "kept"), [(False, False), (True, True)])
def test_retry_delete_on_error_keeps_the_cache_only_when_asked(shim, retry, kept):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    conf = shim.conf(retryDeleteOnError=retry)
    assert shim.run("ADD", conf).status == 0
    shim.executor.failures[("ptp", "DEL")] = CniError("DelegateFailed", "busy", 11)
    out = shim.run("DEL", conf)
    assert out.status == 1
    # Multus's delPlugins answer for one failure, untyped (999).
    assert out.json["code"] == 999
    assert out.json["msg"] == (
        'DelegateDel: error invoking DelegateDel - "ptp": error in getting result from DelNetwork: busy'
    )
    assert (shim.plan_doc() is not None) is kept


def test_corrupt_cache_del_succeeds_and_keeps_the_file(shim):
    shim.cni_dir.mkdir()
    (shim.cni_dir / "c1").write_text('{"kind": "cniShimDelegatesV1", "delega')
    out = shim.run("DEL", shim.conf())
    assert out.status == 0
    assert (shim.cni_dir / "c1").read_text().startswith('{"kind"')
    assert any(level == "error" for level, _ in shim.log.lines)


def test_pod_not_found_on_add_returns_placeholder_and_runs_nothing(shim):
    out = shim.run("ADD", shim.conf(cniVersion="0.3.1"))
    assert out.status == 0
    assert out.json == {
        "cniVersion": "0.3.1",
        "interfaces": [{"name": "eth0", "sandbox": "/run/netns/t1"}],
        "ips": [{"version": "4", "address": "0.0.0.0/0", "gateway": "0.0.0.0"}],
    }
    assert shim.executor.calls == []
    assert shim.plan_doc() is None


def test_pod_uid_mismatch_fails_add_before_any_delegate(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-other")
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert out.json["details"] == "PodUIDMismatch"
    assert shim.executor.calls == []


def test_transient_pod_read_is_retried_then_fails_visibly(shim):
    shim.kube.pod_errors = [503] * 50
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert out.json["code"] == 11
    assert shim.clock.now <= 2.5
    assert shim.executor.calls == []


def test_missing_nad_fails_add_visibly(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "absent"})
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert out.json["details"] == "NoNetworkFound"
    assert shim.executor.calls == []


def test_network_status_is_written_in_multus_format_after_conflicts(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    shim.kube.conflicts = 2
    assert shim.run("ADD", shim.conf()).status == 0
    status = shim.kube.pods[("ns1", "pod1")]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"]
    entries = json.loads(status)
    assert [e["name"] for e in entries] == ["cluster", "ns1/net-a"]
    assert entries[0]["default"] is True and "default" not in entries[1]
    assert entries[1]["interface"] == "net1"
    assert status.startswith('[{\n    "name": "cluster",')
    assert shim.clock.sleeps.count(0.01) == 2


def test_default_network_annotation_replaces_the_master(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {"v1.multus-cni.io/default-network": "alt"})
    shim.kube.add_nad("kube-system", "alt", _nad_conf("alt", "plug-alt"))
    assert shim.run("ADD", shim.conf()).status == 0
    assert shim.executor.commands() == [("plug-alt", "ADD", "eth0")]


def test_cluster_network_and_default_networks_consume_indices(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("kube-system", "x", _nad_conf("x", "plug-x"))
    shim.kube.add_nad("kube-system", "y", _nad_conf("y", "plug-y"))
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    (shim.conf_dir / "10-main.conf").write_text(json.dumps(_nad_conf("main", "plug-main")))
    conf = shim.conf(clusterNetwork="main", defaultNetworks=["x", "y"])
    assert shim.run("ADD", conf).status == 0
    assert shim.executor.commands() == [
        ("plug-main", "ADD", "eth0"),
        ("plug-x", "ADD", "net1"),
        ("plug-y", "ADD", "net2"),
        ("plug-a", "ADD", "net3"),
    ]


def test_namespace_isolation_rejects_foreign_namespaces(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "other/net-a"})
    shim.kube.add_nad("other", "net-a", _nad_conf("a"))
    out = shim.run("ADD", shim.conf(namespaceIsolation=True))
    assert out.status == 1
    assert out.json["details"] == "NamespaceIsolationViolation"


def test_interface_collision_is_refused_before_any_delegate(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a@net2,net-b"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a"))
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b"))
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert out.json["details"] == "InterfaceNameCollision"
    assert shim.executor.calls == []


def test_selection_options_reach_delegates_via_capabilities_and_cni_args(shim):
    sel = [{"name": "net-a", "mac": "02:11:22:33:44:55", "ips": ["10.1.1.5/24"], "cni-args": {"k": 1}}]
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: json.dumps(sel)})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a", capabilities={"mac": True, "ips": True}))
    assert shim.run("ADD", shim.conf()).status == 0
    call = shim.executor.calls[1]
    assert call.stdin["runtimeConfig"] == {"mac": "02:11:22:33:44:55", "ips": ["10.1.1.5/24"]}
    assert call.stdin["args"] == {"cni": {"k": 1}}
    assert call.env["CNI_ARGS"] == (
        "IgnoreUnknown=true;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_INFRA_CONTAINER_ID=;"
        "K8S_POD_UID=uid-1;MAC=02:11:22:33:44:55;IP=10.1.1.5/24"
    )
    # the master declares no capability: no runtimeConfig at all
    assert "runtimeConfig" not in shim.executor.calls[0].stdin


def test_delegate_never_receives_a_version_it_does_not_support(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    shim.executor.supported["ptp"] = ["0.3.1", "0.4.0", "1.0.0"]
    conf = shim.conf(
        delegates=[{"cniVersion": "1.0.0", "cniVersions": ["1.0.0", "1.1.0"], "name": "c", "type": "ptp"}]
    )
    assert shim.run("ADD", conf).status == 0
    assert shim.executor.calls[0].stdin["cniVersion"] == "1.0.0"
    conf = shim.conf(delegates=[{"cniVersion": "1.1.0", "name": "c", "type": "ptp"}])
    shim.executor.calls.clear()
    out = shim.run("ADD", conf, container_id="c2")
    assert out.status == 1
    assert out.json["code"] == 1
    assert shim.executor.calls == []


def test_conflist_delegate_chains_prev_result(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    conflist = {"cniVersion": "1.0.0", "name": "chain", "plugins": [{"type": "first"}, {"type": "tuning"}]}
    assert shim.run("ADD", shim.conf(delegates=[conflist])).status == 0
    first, second = shim.executor.calls
    assert "prevResult" not in first.stdin
    assert second.stdin["prevResult"]["interfaces"][0]["name"] == "eth0"
    assert second.stdin["name"] == "chain"


def test_check_passes_through_to_cached_delegates(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    assert shim.run("ADD", shim.conf()).status == 0
    shim.executor.calls.clear()
    assert shim.run("CHECK", shim.conf()).status == 0
    assert shim.executor.commands() == [("ptp", "CHECK", "eth0")]
    assert shim.executor.calls[0].stdin["prevResult"]["ips"][0]["address"] == "10.0.0.2/24"


def test_gc_deletes_attachments_missing_from_valid_list_and_forwards_gc(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    conf = shim.conf(cniVersion="1.1.0", delegates=[{"cniVersion": "1.1.0", "name": "c", "type": "ptp"}])
    assert shim.run("ADD", conf, container_id="keep").status == 0
    assert shim.run("ADD", conf, container_id="stale").status == 0
    shim.executor.calls.clear()
    gc_conf = dict(conf, **{"cni.dev/valid-attachments": [{"containerID": "keep", "ifname": "eth0"}]})
    out = shim.run("GC", gc_conf, container_id="", ifname="", netns="", args="")
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [("ptp", "DEL", "eth0"), ("ptp", "GC", "")]
    assert shim.executor.calls[0].env["CNI_CONTAINERID"] == "stale"
    assert shim.executor.calls[1].stdin["cni.dev/valid-attachments"] == [
        {"containerID": "keep", "ifname": "eth0"}
    ]
    assert shim.plan_doc("stale") is None and shim.plan_doc("keep") is not None


def test_gc_with_missing_key_treats_valid_list_as_empty(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    conf = shim.conf(cniVersion="1.1.0")
    assert shim.run("ADD", conf).status == 0
    assert shim.run("GC", conf, container_id="", ifname="", netns="", args="").status == 0
    assert shim.plan_doc() is None


def test_status_runs_only_on_a_1_1_master(shim):
    conf = shim.conf(cniVersion="1.1.0")
    assert shim.run("STATUS", conf).status == 0
    assert shim.executor.calls == []  # master is 1.0.0: skipped, never sent STATUS
    conf = shim.conf(cniVersion="1.1.0", delegates=[{"cniVersion": "1.1.0", "name": "c", "type": "ptp"}])
    shim.executor.failures[("ptp", "STATUS")] = plugin_failure(
        "ptp", 1, b'{"code": 50, "msg": "not ready"}', b""
    )
    out = shim.run("STATUS", conf)
    assert out.status == 1 and (out.json["code"], out.json["msg"]) == (50, "not ready")


def test_cache_keeps_exact_delegate_bytes(shim):
    raw = '{"cniVersion":"1.0.0","name":"a","type":"plug-a","weird":1.50,"z":{"b":1,"a":2}}'
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", raw)
    assert shim.run("ADD", shim.conf()).status == 0
    stored = shim.plan_doc()["delegates"][1]
    assert base64.b64decode(stored["conf"]).decode() == raw
    assert stored["name"] == "ns1/net-a"


def test_del_adopts_a_cache_written_by_multus_for_in_place_upgrade(shim):
    weave = {"cniVersion": "1.0.0", "name": "weave1", "type": "weave-net"}
    macvlan = {"cniVersion": "1.0.0", "name": "net1", "type": "macvlan", "capabilities": {"mac": True}}
    multus_cache = [
        {
            "Conf": {**weave, "ipam": {}, "dns": {}},
            "ConfList": {},
            "Name": "weave1",
            "IsFilterV4Gateway": False,
            "IsFilterV6Gateway": False,
            "Bytes": base64.b64encode(json.dumps(weave).encode()).decode(),
        },
        {
            "Conf": {**macvlan, "ipam": {}, "dns": {}},
            "ConfList": {},
            "Name": "test/net1",
            "ifnameRequest": "macvlan1",
            "macRequest": "c2:11:22:33:44:66",
            "IsFilterV4Gateway": False,
            "IsFilterV6Gateway": True,
            "Bytes": base64.b64encode(json.dumps(macvlan).encode()).decode(),
        },
        {
            "Conf": {"ipam": {}, "dns": {}},
            "ConfList": {},
            "Name": "third",
            "Bytes": base64.b64encode(
                json.dumps({"name": "third", "plugins": [{"type": "ptp"}]}).encode()
            ).decode(),
        },
    ]
    shim.cni_dir.mkdir()
    (shim.cni_dir / "c1").write_text(json.dumps(multus_cache))
    out = shim.run("DEL", shim.conf())
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [
        ("ptp", "DEL", "net2"),
        ("macvlan", "DEL", "macvlan1"),
        ("weave-net", "DEL", "eth0"),
    ]
    assert shim.executor.calls[0].stdin["cniVersion"] == "1.0.0"  # empty conflist version takes the shim's
    assert shim.executor.calls[1].stdin["runtimeConfig"] == {"mac": "c2:11:22:33:44:66"}
    assert shim.kube.reads == []
    assert shim.plan_doc() is None


def test_default_route_request_replaces_every_interfaces_defaults_and_the_cached_result(shim):
    sel = [{"name": "net-a"}, {"name": "net-b", "default-route": ["10.1.0.1"]}]
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: json.dumps(sel)})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    shim.executor.results["plug-b"] = {
        "interfaces": [{"name": "net2", "sandbox": "/run/netns/t1"}],
        "ips": [{"address": "10.1.0.5/24", "interface": 0}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.0.254"}, {"dst": "10.9.0.0/16"}],
    }
    out = shim.run("ADD", shim.conf())
    assert out.status == 0, out.stdout
    assert shim.routes.calls == [
        ("/run/netns/t1", "eth0", ()),
        ("/run/netns/t1", "net1", ()),
        ("/run/netns/t1", "net2", ("10.1.0.1",)),
    ]
    cached = json.loads((shim.cni_dir / "results" / "b-c1-net2").read_text())
    assert cached["result"]["routes"] == [{"dst": "10.9.0.0/16"}, {"dst": "0.0.0.0/0", "gw": "10.1.0.1"}]
    # the runtime's result is the plugin's own, untouched (Multus)
    assert out.json["interfaces"][0]["name"] == "eth0"


def test_without_default_route_requests_no_route_is_touched(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: '[{"name":"net-a","default-route":null}]'})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    assert shim.run("ADD", shim.conf()).status == 0
    assert shim.routes.calls == []


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        ("other/net-x@eth1", [("other", "net-x", "eth1")]),
        ('[{"name":"net-x","namespace":"other","interface":"eth1"}]', [("other", "net-x", "eth1")]),
        ("net-a, other/net-x", [("ns1", "net-a", "net1"), ("other", "net-x", "net2")]),
        ('[{"name":"net-a"},{"name":"net-a"}]', [("ns1", "net-a", "net1"), ("ns1", "net-a", "net2")]),
        ("", []),
        ("[]", []),
    ],
)
def test_multus_annotation_cases_resolve_namespaces_and_interfaces(shim, annotation, expected):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: annotation})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    shim.kube.add_nad("other", "net-x", _nad_conf("x", "plug-x"))
    assert shim.run("ADD", shim.conf()).status == 0
    nad_reads = [(ns, name) for kind, ns, name in shim.kube.reads if kind == "nad"]
    assert nad_reads == [(ns, name) for ns, name, _ in expected]
    assert [c.ifname for c in shim.executor.calls[1:]] == [ifname for _, _, ifname in expected]


@pytest.mark.parametrize(
    "annotation", ['{"name":"a"}', "a/b/c", "net@a@b", "UPPER", '[{"name":"a","ips":["nope"]}]', "[null]"]
)
def test_invalid_annotations_fail_add_before_any_delegate(shim, annotation):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: annotation})
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert out.json["code"] == 7
    assert out.json["details"] == "InvalidNetworksAnnotation"
    assert shim.executor.calls == []


def test_static_pods_are_exempt_from_the_uid_check(shim):
    shim.kube.add_pod("ns1", "pod1", "mirror-uid", {"kubernetes.io/config.source": "file"})
    assert shim.run("ADD", shim.conf()).status == 0


def test_del_passes_the_runtimes_netns_even_when_empty_and_gc_uses_the_recorded_one(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    conf = shim.conf(cniVersion="1.1.0")
    assert shim.run("ADD", conf, container_id="a").status == 0
    assert shim.run("ADD", conf, container_id="b").status == 0
    shim.executor.calls.clear()
    assert shim.run("DEL", conf, container_id="a", netns="").status == 0
    assert shim.executor.calls[-1].env["CNI_NETNS"] == ""
    assert shim.run("GC", conf, container_id="", ifname="", netns="", args="").status == 0
    assert shim.executor.calls[-1].env["CNI_NETNS"] == "/run/netns/t1"
    assert shim.executor.calls[-1].env["CNI_CONTAINERID"] == "b"


@pytest.mark.parametrize("value", ["", "a,b", "bad/na/me", "[{]"])
def test_bad_default_network_annotation_is_a_named_config_error(shim, value):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {"v1.multus-cni.io/default-network": value})
    out = shim.run("ADD", shim.conf())
    assert out.status == 1 and out.json["code"] == 7, out.json
    assert "failed unexpectedly" not in out.json["msg"]
    assert shim.executor.calls == []


def test_cluster_network_nad_read_failure_is_not_replaced_by_a_local_file(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    (shim.conf_dir / "10-main.conf").write_text(json.dumps(_nad_conf("main", "plug-local")))

    def broken(namespace, name):
        raise ApiError("apiserver unavailable", 503)

    shim.kube.get_nad = broken
    out = shim.run("ADD", shim.conf(clusterNetwork="main"))
    assert out.status == 1 and out.json["code"] == 11
    assert shim.executor.calls == []


def test_network_status_reuses_the_pod_read_by_add_and_rereads_only_after_a_conflict(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    assert shim.run("ADD", shim.conf(), container_id="first").status == 0
    assert [r for r in shim.kube.reads if r[0] == "pod"] == [("pod", "ns1", "pod1")]
    assert len(shim.kube.status_writes) == 1
    shim.kube.reads.clear()
    shim.kube.conflicts = 1
    assert shim.run("ADD", shim.conf(), container_id="second").status == 0
    assert [r for r in shim.kube.reads if r[0] == "pod"] == [("pod", "ns1", "pod1")] * 2
    assert len(shim.kube.status_writes) == 2


def test_network_status_rereads_a_pod_that_came_from_an_informer_cache(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    shim.kube.pod_reads_live = False
    assert shim.run("ADD", shim.conf()).status == 0
    assert [r for r in shim.kube.reads if r[0] == "pod"] == [("pod", "ns1", "pod1")] * 2
    assert len(shim.kube.status_writes) == 1


class _Forgetful(dict[bytes, object]):
    """A parse memo that never remembers, so every parse of the same bytes shows."""

    def get(self, key, default=None):
        return None


def test_an_add_parses_each_delegate_config_once(shim, monkeypatch):
    from cni_shim.core import network  # noqa: PLC0415

    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-a,net-b"})
    shim.kube.add_nad("ns1", "net-a", _nad_conf("a", "plug-a"))
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    parsed: list[bytes] = []
    real = network._parse

    def counted(raw, what):
        parsed.append(raw)
        return real(raw, what)

    monkeypatch.setattr(network, "_PARSED", _Forgetful())
    monkeypatch.setattr(network, "_parse", counted)
    assert shim.run("ADD", shim.conf()).status == 0
    assert len(parsed) == 3  # the cluster network and the two NADs, each once
    assert len(set(parsed)) == 3
