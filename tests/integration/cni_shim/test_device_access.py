"""No VF without an allocation, on the real API server, real network namespaces and cnitool (issue #31).

The shim runs thin as the bed's "cni" identity, with the real sriov test plugin over the fake
two-rail node (`sysfsRoot` is its tree, as the plugin's SRIOV_SYSFS_ROOT). A tenant NAD naming a
VF by deviceID is refused before any delegate runs, whether the VF is free or another Pod's; the
DEL that follows a refused ADD runs no delegate against it; an ordinary network and the
administrator's opt-out namespace work as before. Secrets planted in NAD configs reach no log
line of the shim (stderr, logFile) or the daemon.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sriov_contract import keys
from testbed.cni_daemon import shim_conf
from testbed.cni_objects import bind_by_hand, create_nad, create_pod
from testbed.managed_shadows import rendered_sriov_config
from testbed.netlinks import host_link, ns_links
from testbed.nodecni import ptp_host_local
from tests.support.cni import CniRun, assert_vf_home
from tests.support.cni_daemon import pod_args, run_shim
from tests.support.thin_node import ThinNode

pytestmark = [pytest.mark.integration, pytest.mark.netns]

SECRET = "planted-s3cr3t-7f1c9e"


@pytest.fixture
def node(thin_node: ThinNode) -> ThinNode:
    return thin_node


def _static_nad(api: Any, ns: str, name: str, pci: str, tmp: Path) -> None:
    config = {
        "cniVersion": "1.0.0",
        "name": name,
        "type": "sriov",
        "deviceID": pci,
        "token": SECRET,  # a credential a careless NAD author left in the config
        "ipam": {"type": "host-local", "subnet": "192.0.2.0/24", "dataDir": str(tmp / "ipam")},
    }
    create_nad(api, ns, {"metadata": {"name": name}, "spec": {"config": json.dumps(config)}})


def _refused(out: CniRun, reason: str) -> str:
    """cnitool prints the plugin's error as `plugin type=... failed (add): <msg>; <details>`."""
    assert out.returncode != 0, out.stdout + out.stderr
    assert out.stderr.rstrip().endswith(f"; {reason}"), out.stderr
    return out.stderr


def _only_loopback(netns: str) -> None:
    assert list(ns_links(netns)) == ["lo"]


def test_a_tenant_nad_naming_a_free_vf_is_refused_and_its_del_runs_nothing_on_it(
    testbed, k8s_namespace, node, fake_node, netns
):
    api, ns = testbed.api_client, k8s_namespace
    vf = fake_node.rail_vfs("rail-a")[0]
    _static_nad(api, ns, "steal", vf.pci, node.tmp)
    pod = create_pod(api, ns, "tenant", testbed.node_name, {keys.NETWORKS_ANNOTATION: "steal"})
    sandbox = netns()
    error = _refused(node.run("add", sandbox, pod), "VirtualFunctionNotAllocated")
    assert f"SR-IOV virtual function {vf.pci} (deviceID {vf.pci} in its config)" in error
    _only_loopback(sandbox)  # not even the cluster network ran
    assert_vf_home(vf)

    rm = node.run("del", sandbox, pod)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert_vf_home(vf)
    assert not (node.tmp / "sriov-data").exists()  # the sriov plugin never ran, ADD nor DEL
    log = node.log.read_text()
    assert f"not deleting network {ns}/steal" in log
    assert SECRET not in log + error + rm.stderr


def test_another_pods_vf_is_refused_by_deviceid_and_by_shadow_and_stays_with_its_pod(
    testbed, k8s_namespace, node, fake_node, netns
):
    api, ns = testbed.api_client, k8s_namespace
    vf = fake_node.rail_vfs("rail-a")[1]
    owner = create_pod(api, ns, "owner", testbed.node_name, {})
    config = rendered_sriov_config(vf.pci, dataDir=str(node.tmp / "sriov-data"))
    shadow, _ = bind_by_hand(api, owner, testbed.node_name, config, pci=vf.pci)
    owner_ns = netns()
    add = node.run("add", owner_ns, owner)
    assert add.returncode == 0, add.stdout + add.stderr
    assert "dra0" in ns_links(owner_ns) and host_link(vf.netdev) is None

    # By deviceID in a tenant NAD, and by selecting the owner's shadow outright.
    _static_nad(api, ns, "reuse", vf.pci, node.tmp)
    by_id = create_pod(api, ns, "by-id", testbed.node_name, {keys.NETWORKS_ANNOTATION: "reuse"})
    by_shadow = create_pod(
        api, ns, "by-shadow", testbed.node_name, {keys.NETWORKS_ANNOTATION: json.dumps([shadow["selection"]])}
    )
    for pod, reason in ((by_id, "VirtualFunctionNotAllocated"), (by_shadow, "ManagedShadowPodMismatch")):
        sandbox = netns()
        _refused(node.run("add", sandbox, pod), reason)
        rm = node.run("del", sandbox, pod)  # no delegate cache: rebuilt from the live Pod, less the VF
        assert rm.returncode == 0, rm.stdout + rm.stderr
        _only_loopback(sandbox)
        assert "dra0" in ns_links(owner_ns), f"{pod['metadata']['name']}'s DEL took the owner's VF"

    rm = node.run("del", owner_ns, owner)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    assert_vf_home(vf)


def test_ordinary_networks_and_the_opt_out_namespace_work_as_before(
    testbed, k8s_namespace, node, fake_node, netns
):
    api, ns = testbed.api_client, k8s_namespace
    plain = {"cniVersion": "1.0.0", "token": SECRET, **ptp_host_local("10.82.0.0/24", node.tmp / "ipam")}
    create_nad(api, ns, {"metadata": {"name": "plain"}, "spec": {"config": json.dumps(plain)}})
    vf = fake_node.rail_vfs("rail-b")[0]
    _static_nad(api, ns, "static", vf.pci, node.tmp)
    pod = create_pod(api, ns, "lab", testbed.node_name, {keys.NETWORKS_ANNOTATION: "plain, static"})
    sandbox = netns()
    _refused(node.run("add", sandbox, pod), "VirtualFunctionNotAllocated")
    assert node.run("del", sandbox, pod).returncode == 0

    node.write(staticDeviceNamespaces=[ns])  # the administrator's opt-out for this namespace
    add = node.run("add", sandbox, pod)
    assert add.returncode == 0, add.stdout + add.stderr
    assert {"eth0", "net1", "net2"} <= set(ns_links(sandbox)) and host_link(vf.netdev) is None
    rm = node.run("del", sandbox, pod)
    assert rm.returncode == 0, rm.stdout + rm.stderr
    _only_loopback(sandbox)
    assert_vf_home(vf)
    assert SECRET not in node.log.read_text() + add.stderr + rm.stderr


def test_a_secret_in_a_nad_reaches_no_line_of_the_daemons_log_or_the_shims_stderr(
    testbed, k8s_namespace, cni_daemon, thick_bin, tmp_path
):
    """Thick mode at debug level: an ordinary NAD, a refused static one and an unparsable one,
    each carrying the secret; neither the daemon's log nor the forwarding shim's stderr has it."""
    api, ns = testbed.api_client, k8s_namespace
    calls = tmp_path / "calls.jsonl"
    fine = {"cniVersion": "1.0.0", "type": "recorder", "logFile": str(calls), "password": SECRET}
    create_nad(api, ns, {"metadata": {"name": "fine"}, "spec": {"config": json.dumps(fine)}})
    create_nad(
        api, ns, {"metadata": {"name": "broken"}, "spec": {"config": '{"password": "' + SECRET + '", '}}
    )
    daemon = cni_daemon(
        {
            "cniDir": str(tmp_path / "cache"),
            "binDir": str(thick_bin),
            "liveNetworkConfigOnAdd": True,
            "logLevel": "debug",
            "logFile": str(tmp_path / "daemon-requests.log"),
        }
    )
    conf = shim_conf(
        daemon,
        delegates=[{"cniVersion": "1.0.0", "name": "podnet", "type": "recorder", "logFile": str(calls)}],
    )
    outputs = []
    for name, selects in (("ok", "fine"), ("bad", "broken")):
        pod = create_pod(api, ns, name, testbed.node_name, {keys.NETWORKS_ANNOTATION: selects})
        args = pod_args(ns, name, pod["metadata"]["uid"])
        for verb in ("ADD", "DEL"):
            out = run_shim(thick_bin, verb, conf, f"cid-{name}", args)
            outputs.append(out.stderr)
    assert json.loads(calls.read_text().splitlines()[1])["stdin"]["password"] == SECRET  # it was there
    assert SECRET not in daemon.log_path.read_text()
    assert SECRET not in (tmp_path / "daemon-requests.log").read_text()
    assert not [err for err in outputs if SECRET in err]
