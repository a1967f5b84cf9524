"""The generated config in the daemon and the shim: multus-shim's default socket, the dropped
readiness key, and when the daemon generates at all."""

from __future__ import annotations

import base64
import json

from cni_shim.app.config import DaemonConfig
from cni_shim.app.thick import config_writer
from cni_shim.thick import forward
from cni_shim.thick.dispatch import Dispatcher


def test_a_multus_shim_config_without_a_socket_dir_forwards_to_multus_default():
    target = forward.target(
        b'{"cniVersion":"0.4.0","name":"multus-cni-network","type":"multus-shim","clusterNetwork":"/p"}'
    )
    assert target is not None and target.path == "/run/multus/cni-shim.sock"
    named = forward.target(b'{"type":"multus-shim","daemonSocketDir":"/run/x/"}')
    assert named is not None and named.path == "/run/x/cni-shim.sock"
    assert forward.target(b'{"type":"multus","name":"multus-shim"}') is None  # thin: only the type counts


def _conf(raw):
    return DaemonConfig(
        raw=raw, socket_dir="/s", kubeconfig="", chroot_dir="", metrics_address="", node_name=""
    )


def test_the_daemon_generates_only_when_told_auto():
    assert config_writer(_conf({}), lambda *a, **k: None) is None  # Multus defaults to auto; we do not
    assert config_writer(_conf({"multusConfigFile": "/etc/x.conf"}), lambda *a, **k: None) is None
    writer = config_writer(_conf({"MultusConfigFile": "auto", "cniConfigDir": "/c"}), lambda *a, **k: None)
    assert writer is not None and writer.conf.output_path == "/c/00-multus.conf"


class _Views:
    def live(self, *, prefetch=True):
        return None

    def cached(self):
        return None


class _Requests:
    def request(self, command, result, seconds):
        pass


def _body(conf):
    env = {
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": "c1",
        "CNI_NETNS": "/run/netns/t1",
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1",
        "CNI_PATH": "/opt/cni/bin",
    }
    return json.dumps({"env": env, "config": base64.b64encode(json.dumps(conf).encode()).decode()}).encode()


def test_a_generated_config_does_not_lay_the_daemons_readiness_file_over_requests(shim, tmp_path):
    never = str(tmp_path / "never-written")
    shim.kube = None

    def dispatcher(drop):
        return Dispatcher(
            {"readinessindicatorfile": never},
            _Views(),
            _Requests(),
            lambda *a, **k: None,
            base_services=shim.services,
            drop_keys=drop,
        )

    assert dispatcher(("readinessindicatorfile",)).serve(_body(shim.conf())).status == 200
    # Without the drop the daemon's key applies and the ADD waits for the file (in vain).
    waited = dispatcher(()).serve(_body(shim.conf()))
    assert waited.status == 400 and b"readinessindicatorfile" in waited.body
    # Multus's ignoreKeys only filter the daemon's keys: the shim's own readiness file still counts.
    own = dispatcher(("readinessindicatorfile",)).serve(
        _body({**shim.conf(), "readinessindicatorfile": never})
    )
    assert own.status == 400 and b"readinessindicatorfile" in own.body
