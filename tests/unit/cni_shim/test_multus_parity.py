"""Issue #18 points 1-4: what the runtime sees where Multus answers the same failure (error msg,
a delegate's own error, CNI_NETNS on ADD, a Pod that is not visible yet)."""

from __future__ import annotations

import json

from cni_shim.errors import CniError
from cni_shim.node.execution import plugin_failure

NETWORKS = "k8s.v1.cni.cncf.io/networks"
ADD_ARGS = "K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=uid-1"


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
    from cni_shim import handler  # noqa: PLC0415

    shim.kube.add_pod("ns1", "pod1", "uid-1", {NETWORKS: "net-b"})
    shim.kube.add_nad("ns1", "net-b", _nad_conf("b", "plug-b"))
    shim.kube = _AppearsLater(shim.kube, misses=4)  # about a second at the retry interval
    out = shim.run("ADD", shim.conf(), args=ADD_ARGS)
    assert out.status == 0, out.stdout
    assert shim.executor.commands() == [("ptp", "ADD", "eth0"), ("plug-b", "ADD", "net1")]
    assert shim.clock.sleeps == [handler.POD_RETRY_INTERVAL] * 4


def test_add_gives_up_on_a_missing_pod_when_the_budget_ends(shim):
    from cni_shim import handler  # noqa: PLC0415

    out = shim.run("ADD", shim.conf(), args=ADD_ARGS)
    assert out.status == 0
    assert out.json["ips"] == [{"address": "0.0.0.0/0", "gateway": "0.0.0.0"}]
    assert shim.executor.calls == []
    assert shim.clock.now <= handler.POD_RETRY_BUDGET
    pod_reads = [r for r in shim.kube.reads if r[0] == "pod"]
    assert len(pod_reads) == int(handler.POD_RETRY_BUDGET / handler.POD_RETRY_INTERVAL) + 1


def test_del_never_waits_for_a_pod(shim):
    out = shim.run("DEL", shim.conf(), args=ADD_ARGS)
    assert out.status == 0
    assert shim.clock.sleeps == []
    assert [r for r in shim.kube.reads if r[0] == "pod"] == [("pod", "ns1", "pod1")]
