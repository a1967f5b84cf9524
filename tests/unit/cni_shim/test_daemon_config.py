"""daemon-config.json: what the daemon itself reads from it, and delegates run under chrootDir."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from cni_shim.app.config import DEFAULT_SOCKET_DIR, load_config
from cni_shim.errors import CniError
from cni_shim.node.chroot import ChrootExecutor
from sriov_contract.errors import ReasonedError

DEPLOYED = Path(__file__).resolve().parents[3] / "deploy" / "base" / "cni-daemon-config.yaml"


def write(tmp_path: Path, doc) -> str:
    path = tmp_path / "daemon-config.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def test_the_deployed_config_is_understood(tmp_path):
    text = yaml.safe_load(DEPLOYED.read_text())["data"]["daemon-config.json"]
    conf = load_config(write(tmp_path, text), {"NODE_NAME": "n1"})
    assert conf.socket_dir == "/host/run/cni-shim/"
    assert conf.metrics_address == ":9091"
    assert conf.chroot_dir == "/hostroot"
    assert conf.node_name == "n1"
    assert conf.raw["liveNetworkConfigOnAdd"] is True


def test_defaults_and_overrides(tmp_path):
    conf = load_config(
        write(tmp_path, {"metricsPort": 9, "metricsAddress": "127.0.0.1:7"}), {"MULTUS_NODE_NAME": "m"}
    )
    assert conf.socket_dir == DEFAULT_SOCKET_DIR
    assert conf.metrics_address == "127.0.0.1:7"
    assert conf.node_name == "m"
    assert load_config(write(tmp_path, {}), {}, "0.0.0.0:1").metrics_address == "0.0.0.0:1"
    assert load_config(write(tmp_path, {"metricsPort": True}), {}).metrics_address == ""


@pytest.mark.parametrize(
    ("doc", "reason"),
    [("{", "DaemonConfigMalformed"), ("[]", "DaemonConfigMalformed"), (None, "DaemonConfigUnreadable")],
)
def test_a_bad_config_stops_start_up_with_a_reason(tmp_path, doc, reason):
    path = write(tmp_path, doc) if doc is not None else str(tmp_path / "absent.json")
    with pytest.raises(ReasonedError) as err:
        load_config(path, {})
    assert err.value.reason == reason
    assert path in err.value.message


def test_chroot_executor_runs_the_hosts_plugin_inside_the_root(tmp_path, cni_bin_dir):
    loopback = (cni_bin_dir / "loopback").resolve()  # a static Go binary: no libraries needed in the root
    root = tmp_path / "hostroot"
    (root / "opt/cni/bin").mkdir(parents=True)
    shutil.copy(loopback, root / "opt/cni/bin/loopback")
    out = ChrootExecutor(str(root)).execute("loopback", ["/opt/cni/bin"], {"CNI_COMMAND": "VERSION"}, b"{}")
    assert "1.0.0" in json.loads(out)["supportedVersions"]
    with pytest.raises(CniError) as err:
        ChrootExecutor(str(root)).execute("ptp", ["/opt/cni/bin"], {"CNI_COMMAND": "VERSION"}, b"{}")
    assert err.value.reason == "DelegateNotFound"
    assert str(root) in err.value.message
