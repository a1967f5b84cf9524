"""The shim reads an existing Multus config unchanged (apart from `type`), with Multus's defaults."""

from __future__ import annotations

import json
from typing import Any

from cni_shim.core import netconf


def _load(doc):
    return netconf.load(netconf.fold(doc))


def test_defaults_match_multus():
    conf = _load({"cniVersion": "1.0.0", "name": "n", "delegates": [{"type": "x"}]})
    assert (conf.conf_dir, conf.cni_dir, conf.bin_dir) == (
        "/etc/cni/multus/net.d",
        "/var/lib/cni/multus",
        "/opt/cni/bin",
    )
    assert conf.log_to_stderr is True and conf.log_level == ""
    assert conf.global_namespaces == ("default",)
    assert conf.system_namespaces == ("kube-system",)
    assert conf.multus_namespace == "kube-system"
    assert conf.retry_delete_on_error is False and conf.namespace_isolation is False
    assert conf.live_network_config_on_add is False
    assert conf.valid_attachments is None


def test_explicit_empty_values_override_defaults_and_keys_fold_case():
    conf = _load(
        {
            "cniVersion": "1.0.0",
            "name": "n",
            "BinDir": "",
            "SYSTEMNAMESPACES": [],
            "logToStderr": False,
            "globalNamespaces": " a , b",
            "liveNetworkConfigOnAdd": True,
            "delegates": [{"type": "x"}],
        }
    )
    assert conf.bin_dir == "" and conf.system_namespaces == () and conf.log_to_stderr is False
    assert conf.global_namespaces == ("a", "b")
    assert conf.live_network_config_on_add is True


def test_cluster_network_ignores_delegates_and_runtime_config_is_filtered():
    conf = _load(
        {
            "cniVersion": "1.0.0",
            "name": "n",
            "clusterNetwork": "main",
            "delegates": [{"broken": True}],
            "runtimeConfig": {"mac": "02:00:00:00:00:01", "io.kubernetes.cri.pod-annotations": {"a": "b"}},
        }
    )
    assert conf.delegates == ()
    assert conf.runtime_config == {"mac": "02:00:00:00:00:01"}


def test_gc_attachments_prefer_the_valid_key_and_accept_null():
    base = {"cniVersion": "1.1.0", "name": "n", "delegates": [{"type": "x"}]}
    assert _load(
        {**base, "cni.dev/attachments": [{"containerID": "a", "ifname": "eth0"}]}
    ).valid_attachments == (("a", "eth0"),)
    assert (
        _load(
            {**base, "cni.dev/valid-attachments": None, "cni.dev/attachments": [{"containerID": "a"}]}
        ).valid_attachments
        == ()
    )


def test_thin_entrypoint_generated_00_multus_conflist_works_unchanged_but_type(shim):
    """The file Multus's thin entrypoint writes (incl. its `cniConf` typo), only `type` changed."""
    (shim.tmp / "ready").write_text("")
    primary = {"cniVersion": "1.0.0", "name": "cbr0", "type": "ptp", "capabilities": {"portMappings": True}}
    generated: dict[str, Any] = {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "plugins": [
            {
                "type": "cni-shim",
                "capabilities": {"portMappings": True},
                "namespaceIsolation": False,
                "globalNamespaces": "",
                "logToStderr": False,
                "logLevel": "verbose",
                "logFile": "",
                "binDir": "/opt/cni/bin",
                "cniConf": "/host/etc/cni/multus/net.d",
                "readinessindicatorfile": str(shim.tmp / "ready"),
                "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig",
                "delegates": [primary],
            }
        ],
    }
    # libcni hands the plugin its entry plus the list's name/cniVersion and runtimeConfig
    plugin = dict(generated["plugins"][0], name="multus-cni-network", cniVersion="1.0.0")
    plugin["runtimeConfig"] = {"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}
    plugin["cniDir"] = str(shim.cni_dir)
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    out = shim.run("ADD", json.dumps(plugin).encode())
    assert out.status == 0, out.stdout
    call = shim.executor.calls[0]
    assert call.stdin["runtimeConfig"] == {
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]
    }
    assert call.stdin["name"] == "cbr0"


def test_readiness_file_is_waited_for_then_fails_as_try_again(shim):
    shim.kube.add_pod("ns1", "pod1", "uid-1")
    out = shim.run("ADD", shim.conf(readinessindicatorfile=str(shim.tmp / "never")))
    assert out.status == 1 and out.json["code"] == 11
    assert "readinessindicatorfile" in out.json["msg"]
    assert 44 <= shim.clock.now <= 46
    assert shim.executor.calls == []


def test_device_access_settings_default_to_the_real_node_and_no_opt_out():
    conf = _load({"cniVersion": "1.0.0", "name": "n", "delegates": [{"type": "x"}]})
    assert conf.sysfs_root == "/sys"
    assert conf.device_checkpoint_file == "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
    assert conf.static_device_namespaces == ()
    conf = _load(
        {
            "cniVersion": "1.0.0",
            "name": "n",
            "SysfsRoot": "/fake/sys",
            "deviceCheckpointFile": "/tmp/cp",
            "staticdevicenamespaces": ["lab"],
            "delegates": [{"type": "x"}],
        }
    )
    assert (conf.sysfs_root, conf.device_checkpoint_file, conf.static_device_namespaces) == (
        "/fake/sys",
        "/tmp/cp",
        ("lab",),
    )
