"""Issue #18 points 1-4: what the runtime sees where Multus answers the same failure (error msg,
a delegate's own error, CNI_NETNS on ADD, a Pod that is not visible yet)."""

from __future__ import annotations

import json

from cni_shim import main
from cni_shim.errors import CniError
from cni_shim.node.execution import plugin_failure

NETWORKS = "k8s.v1.cni.cncf.io/networks"
ADD_ARGS = "K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=uid-1"


def _env(command: str) -> dict[str, str]:
    return {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": "c1",
        "CNI_NETNS": "/run/netns/t1",
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": ADD_ARGS,
        "CNI_PATH": "/opt/cni/bin",
    }


def _nad_conf(name: str, plugin: str = "macvlan"):
    return {"cniVersion": "1.0.0", "name": name, "type": plugin}


def _delegate_error(code: int, msg: str, details: str = "") -> CniError:
    """A delegate's structured error JSON as the process executor reads it."""
    doc = {"code": code, "msg": msg, **({"details": details} if details else {})}
    return plugin_failure("plug", 1, json.dumps(doc).encode(), b"")


# ---------------------------------------------------------------- point 1: Multus's wording, reason beside


def test_a_malformed_annotation_is_answered_in_multus_words_with_the_reason_in_details(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "[broken"})
    out = shim.run("ADD", shim.conf())
    assert out.status == 1
    assert out.json["msg"].startswith(
        "Multus: [ns1/pod1/uid-1]: error loading k8s delegates k8s args: parsePodNetworkAnnotation: "
        "failed to parse pod Network Attachment Selection Annotation JSON format: "
    )
    assert out.json["details"] == "InvalidNetworksAnnotation"
    assert ("error", f"ADD failed: InvalidNetworksAnnotation (code 7): {out.json['msg']}") in shim.log.lines


def test_a_broken_file_backed_nad_names_the_file_as_the_nad_client_does(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net1"})
    shim.kube.add_nad("ns1", "net1", "")
    broken = shim.conf_dir / "10-broken.conf"
    broken.write_text('{"cniVersion": "1.0.0", "name": "net1"')
    out = shim.run("ADD", shim.conf())
    assert out.json["msg"].startswith(
        "Multus: [ns1/pod1/uid-1]: error loading k8s delegates k8s args: TryLoadPodDelegates: error in "
        "getting k8s network for pod: GetNetworkDelegates: failed getting the delegate: GetCNIConfig: err in "
        f"GetCNIConfigFromFile: Error loading CNI config file {broken}: error parsing configuration: "
    )
    assert out.json["details"] == "InvalidNetworkFile"


def test_a_missing_nad_is_multus_text_exactly(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "missing"})
    out = shim.run("ADD", shim.conf())
    assert out.json["msg"] == (
        "Multus: [ns1/pod1/uid-1]: error loading k8s delegates k8s args: TryLoadPodDelegates: error in "
        "getting k8s network for pod: GetNetworkDelegates: failed getting the delegate: getKubernetesDelegate: "
        "cannot find a network-attachment-definition (missing) in namespace (ns1): "
        'network-attachment-definitions.k8s.cni.cncf.io "missing" not found'
    )
    assert out.json["details"] == "NoNetworkFound"


def test_shorthand_errors_are_multus_texts(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "a/b/c"})
    out = shim.run("ADD", shim.conf())
    assert out.json["msg"] == (
        "Multus: [ns1/pod1/uid-1]: error loading k8s delegates k8s args: parsePodNetworkAnnotation: "
        "parsePodNetworkObjectName: Invalid network object (failed at '/')"
    )


def test_a_failed_delegate_add_keeps_multus_wrapping_and_names_the_reason_in_details(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-b"})
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    shim.executor.failures[("plug-b", "ADD")] = CniError("DelegateFailed", "no VF", 11)
    out = shim.run("ADD", shim.conf())
    assert out.json["msg"] == '[ns1/pod1/uid-1:b]: error adding container to network "b": no VF'
    assert out.json["details"] == "DelegateFailed"


def test_cni_args_errors_are_multus_texts_with_the_reason_beside(shim):
    out = shim.run("ADD", shim.conf(), args="K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;BOGUS=1")
    assert out.json["msg"] == 'Multus: error getting k8s args: ARGS: unknown args ["BOGUS"]'
    assert out.json["details"] == "InvalidCniArgs"


# ---------------------------------------------------------------- point 2: a delegate's own error


def _status_conf(shim, **delegate):
    return shim.conf(
        cniVersion="1.1.0", delegates=[{"cniVersion": "1.1.0", "name": "c", "type": "plug", **delegate}]
    )


def test_a_delegate_status_error_passes_through_unchanged(shim):
    shim.executor.failures[("plug", "STATUS")] = _delegate_error(50, "status failed", "the agent is down")
    out = shim.run("STATUS", _status_conf(shim))
    assert out.status == 1
    assert out.json == {
        "cniVersion": "1.1.0",
        "code": 50,
        "msg": "status failed",
        "details": "the agent is down",
    }


def test_a_delegate_status_error_of_a_conflist_passes_through_unchanged(shim):
    conf = shim.conf(
        cniVersion="1.1.0", delegates=[{"cniVersion": "1.1.0", "name": "c", "plugins": [{"type": "plug"}]}]
    )
    shim.executor.failures[("plug", "STATUS")] = _delegate_error(51, "degraded")
    out = shim.run("STATUS", conf)
    assert (out.json["code"], out.json["msg"]) == (51, "degraded")
    assert "details" not in out.json


def test_a_delegate_add_error_is_wrapped_untyped_as_multus_does(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    shim.executor.failures[("ptp", "ADD")] = _delegate_error(50, "add failed")
    out = shim.run("ADD", shim.conf(), args=ADD_ARGS)
    assert (out.json["code"], out.json["msg"]) == (
        999,
        '[ns1/pod1/uid-1:cluster]: error adding container to network "cluster": add failed',
    )
    assert out.json["details"] == "DelegateFailed"


def test_a_delegate_del_error_is_multus_del_plugins_text(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    assert shim.run("ADD", shim.conf(), args=ADD_ARGS).status == 0
    shim.executor.failures[("ptp", "DEL")] = _delegate_error(50, "del failed")
    out = shim.run("DEL", shim.conf(), args=ADD_ARGS)
    assert (out.json["code"], out.json["msg"]) == (
        999,
        'DelegateDel: error invoking DelegateDel - "ptp": error in getting result from DelNetwork: del failed',
    )


def test_a_delegate_check_error_is_multus_delegate_check_text(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    conf = shim.conf(
        cniVersion="0.4.0", delegates=[{"cniVersion": "0.4.0", "name": "cluster", "type": "ptp"}]
    )
    assert shim.run("ADD", conf, args=ADD_ARGS).status == 0
    shim.executor.failures[("ptp", "CHECK")] = _delegate_error(50, "check failed")
    out = shim.run("CHECK", conf, args=ADD_ARGS)
    assert (out.json["code"], out.json["msg"]) == (
        999,
        'DelegateCheck: error invoking DelegateCheck - "ptp": error in getting result from CheckNetwork: '
        "check failed",
    )


# ---------------------------------------------------------------- point 3: CNI_NETNS on ADD


def test_an_add_into_a_missing_netns_is_refused_before_any_delegate_adds(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-b"})
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    shim.missing_netns.add("fsdadfad")
    out = shim.run("ADD", shim.conf(), netns="fsdadfad", args=ADD_ARGS)
    assert out.status == 1
    assert (out.json["code"], out.json["msg"]) == (
        999,
        '[ns1/pod1/uid-1:cluster]: error adding container to network "cluster": DelegateAdd: cannot set "ptp" '
        'interface name to "eth0": validateIfName: no net namespace fsdadfad found: '
        'failed to Statfs "fsdadfad": no such file or directory',
    )
    assert out.json["details"] == "NetnsNotFound"
    # Nothing was added; like Multus, the first delegate is rolled back (DEL is idempotent).
    assert shim.executor.commands() == [("ptp", "DEL", "eth0")]


def test_the_real_netns_check_is_one_stat():
    from cni_shim.handler import stat_netns  # noqa: PLC0415

    assert stat_netns("/proc/self/ns/net") is None
    assert (
        stat_netns("/nonexistent/fsdadfad")
        == 'failed to Statfs "/nonexistent/fsdadfad": no such file or directory'
    )


# ---------------------------------------------------------------- point 4: a Pod not visible yet


class _AppearsLater:
    """A FakeKube whose Pod becomes visible after ``misses`` NotFound answers."""

    def __init__(self, kube, misses: int) -> None:
        self._kube = kube
        self.misses = misses

    def __getattr__(self, name):
        return getattr(self._kube, name)

    def get_pod(self, namespace, name):
        if self.misses:
            self.misses -= 1
            self._kube.reads.append(("pod", namespace, name))
            return None
        return self._kube.get_pod(namespace, name)


def test_add_waits_for_a_pod_that_appears_within_the_budget(shim):
    from cni_shim.handler import add  # noqa: PLC0415

    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-b"})
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    shim.kube = _AppearsLater(shim.kube, misses=4)  # about a second at the retry interval
    out = shim.run("ADD", shim.conf(), args=ADD_ARGS)
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [("ptp", "ADD", "eth0"), ("plug-b", "ADD", "net1")]
    assert shim.clock.sleeps == [add.POD_RETRY_INTERVAL] * 4


def test_add_gives_up_on_a_missing_pod_when_the_budget_ends(shim):
    from cni_shim.handler import add  # noqa: PLC0415

    out = shim.run("ADD", shim.conf(), args=ADD_ARGS)
    assert out.status == 0
    assert out.json["ips"] == [{"address": "0.0.0.0/0", "gateway": "0.0.0.0"}]
    assert shim.executor.calls == []
    assert shim.clock.now <= add.POD_RETRY_BUDGET
    pod_reads = [r for r in shim.kube.reads if r[0] == "pod"]
    assert len(pod_reads) == int(add.POD_RETRY_BUDGET / add.POD_RETRY_INTERVAL) + 1


def test_del_never_waits_for_a_pod(shim):
    out = shim.run("DEL", shim.conf(), args=ADD_ARGS)
    assert out.status == 0
    assert shim.clock.sleeps == []
    assert [r for r in shim.kube.reads if r[0] == "pod"] == [("pod", "ns1", "pod1")]


# ---------------------------------------------------------------- the rest the compat suite found


def test_a_config_that_fails_to_load_is_multus_load_netconf_text_on_add_and_bare_on_del(shim):
    conf = shim.conf(delegates=[{"cniVersion": "1.0.0", "name": "bad", "plugin": [{"type": "ptp"}]}])
    loader = (
        "LoadNetConf: failed to load delegate 0 config: LoadDelegateNetConf: failed with: "
        "LoadDelegateNetConfList: delegate must have the 'type' or 'plugin' field"
    )
    add = shim.run("ADD", conf)
    assert (add.json["msg"], add.json["code"]) == (f"Multus: error loading netconf: {loader}", 7)
    assert shim.run("DEL", conf).json["msg"] == loader  # Multus's DEL and CHECK return it as it is
    none = shim.run("ADD", shim.conf(delegates=[]))
    assert none.json["msg"] == (
        "Multus: error loading netconf: LoadNetConf: at least one delegate/clusterNetwork must be specified"
    )


def test_malformed_stdin_is_skels_text(shim):
    out = shim.run("ADD", b'{"cniVersion": "1.0.0", "delegates": [}')
    assert out.json["code"] == 6
    assert out.json["msg"].startswith("error unmarshall network config: ")


def test_a_kubeconfig_that_cannot_be_read_is_multus_k8s_client_text(shim, tmp_path):
    from cni_shim.kube import kubeconfig  # noqa: PLC0415

    missing = tmp_path / "missing.kubeconfig"

    def services(env):
        return shim.services(env)._replace(kube_for=lambda conf: kubeconfig.load(conf.kubeconfig))

    out = main.run(_env("ADD"), lambda: json.dumps(shim.conf(kubeconfig=str(missing))).encode(), services)
    assert json.loads(out[1])["msg"] == (
        f"Multus: error getting k8s client: GetK8sClient: failed to get context for the kubeconfig {missing}: "
        f"stat {missing}: no such file or directory"
    )
    assert json.loads(out[1])["details"] == "InvalidKubeconfig"


def test_a_cluster_network_without_an_api_client_is_refused_as_multus_does(shim):
    shim.kube = None
    (shim.conf_dir / "10-cluster.conf").write_text(json.dumps(_nad_conf("cluster", "ptp")))
    out = shim.run("ADD", shim.conf(clusterNetwork=str(shim.conf_dir / "10-cluster.conf")), args=ADD_ARGS)
    assert out.json["msg"] == (
        "Multus: [ns1/pod1/uid-1]: failed to get clusterNetwork/defaultNetworks: "
        "GetDefaultNetworks: must have either Kubernetes config or delegates"
    )
    assert shim.executor.commands() == []


def test_more_than_one_default_network_is_multus_text(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {"v1.multus-cni.io/default-network": "alt,other"})
    out = shim.run("ADD", shim.conf(), args=ADD_ARGS)
    assert out.json["msg"] == (
        "Multus: [ns1/pod1/uid-1]: error loading k8s delegates k8s args: TryLoadPodDelegates: error in loading "
        "K8s cluster default network from pod annotation: tryLoadK8sPodDefaultNetwork: more than one default "
        "network is specified: alt,other"
    )


def test_a_cni_dir_that_cannot_be_made_is_multus_save_scratch_text(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    out = shim.run("ADD", shim.conf(cniDir="/proc/no-such-cni-dir"), args=ADD_ARGS)
    assert out.json["msg"] == (
        "Multus: [ns1/pod1/uid-1]: error saving the delegates: saveDelegates: error in saving the delegates : "
        'saveScratchNetConf: failed to create the multus data directory("/proc/no-such-cni-dir"): '
        "mkdir /proc/no-such-cni-dir: no such file or directory"
    )
    assert (out.json["code"], out.json["details"]) == (5, "DelegateCacheWriteFailed")
    assert shim.executor.commands() == []


def test_check_runs_only_the_configs_own_delegates_as_multus_check_does(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-b"})
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    assert shim.run("ADD", shim.conf(), args=ADD_ARGS).status == 0
    assert shim.run("CHECK", shim.conf(), args=ADD_ARGS).status == 0
    assert [c for c in shim.executor.commands() if c[1] == "CHECK"] == [("ptp", "CHECK", "eth0")]
    # A clusterNetwork replaces the config's delegates: nothing is left to CHECK.
    cluster = shim.conf(clusterNetwork="cluster", multusNamespace="ns1")
    shim.kube.add_nad("ns1", "cluster", _nad_conf("cluster", "ptp"))
    assert shim.run("ADD", cluster, container_id="c2", args=ADD_ARGS).status == 0
    before = len(shim.executor.commands())
    assert shim.run("CHECK", cluster, container_id="c2", args=ADD_ARGS).status == 0
    assert len(shim.executor.commands()) == before


def test_a_gateway_on_an_interface_that_is_not_there_fails_after_every_earlier_delegate_ran(shim):
    shim.kube.add_pod(
        "ns1", "pod1", "uid-1", {NETWORKS: json.dumps([{"name": "net-b", "default-route": ["10.7.9.1"]}])}
    )
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))

    def replace_defaults(netns, ifname, gateways):
        if gateways:
            raise CniError(
                "DefaultRouteFailed",
                "error setting default gateway: SetDefaultGW: Error getting link Link not found",
            )

    shim.routes.replace_defaults = replace_defaults
    out = shim.run("ADD", shim.conf(), args=ADD_ARGS)
    assert out.json["msg"] == (
        "Multus: [ns1/pod1/uid-1]: error setting default gateway: SetDefaultGW: Error getting link Link not found"
    )
    # No rollback: Multus leaves what it added for the runtime's DEL.
    assert [c[:2] for c in shim.executor.commands()] == [("ptp", "ADD"), ("plug-b", "ADD")]
