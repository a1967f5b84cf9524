"""A node's CNI as cnitool sees it: a net.d holding the thin shim (live API, as the bed's "cni"
identity) over the fake two-rail node, with the real sriov test plugin and host-local.

Fixtures: ``thin_kubeconfig`` (session: the bed's thin-shim identity with its rules) and
``thin_node`` (a :class:`ThinNode` for one test).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.cni_daemon import CNI_RULES, CNI_USER
from testbed.nodecni import ptp_host_local
from tests.support.cni import CniRun, run_cnitool
from tests.support.cni_daemon import pod_args, shim_bin_dir


@pytest.fixture(scope="session")
def thin_kubeconfig(testbed: Any) -> Path:
    testbed.grant(CNI_USER, CNI_RULES)
    return Path(testbed.kubeconfig_for("cni"))


@pytest.fixture
def thin_node(
    tmp_path: Path, cni_bin_dir: Path, cnitool: Path, fake_node: Any, thin_kubeconfig: Path
) -> ThinNode:
    bin_dir = shim_bin_dir(tmp_path / "bin", cni_bin_dir, "cni-shim", recorder_as_sriov=False)
    return ThinNode(tmp_path, bin_dir, cnitool, fake_node, thin_kubeconfig)


class ThinNode:
    """cnitool against a net.d holding the shim (thin, live API) over the fake node."""

    def __init__(self, tmp: Path, bin_dir: Path, cnitool: Path, fake_node: Any, kubeconfig: Path) -> None:
        self.tmp, self.bin_dir, self.cnitool, self.fake_node = tmp, bin_dir, cnitool, fake_node
        self.log = tmp / "cni-shim.log"
        self.net_dir = tmp / "net.d"
        self.net_dir.mkdir()
        self.cache = tmp / "cache"
        self.shim: dict[str, Any] = {
            "type": "cni-shim",
            "kubeconfig": str(kubeconfig),
            "cniDir": str(self.cache),
            "binDir": str(bin_dir),
            "sysfsRoot": str(fake_node.sysfs_root),
            "logFile": str(self.log),
            "logLevel": "debug",
            "delegates": [
                {"cniVersion": "1.0.0", "name": "podnet", **ptp_host_local("10.81.0.0/24", tmp / "ipam")}
            ],
        }
        self.write()

    def write(self, **extra: Any) -> None:
        conf = {"cniVersion": "1.0.0", "name": "shimnet", "plugins": [{**self.shim, **extra}]}
        (self.net_dir / "10-shim.conflist").write_text(json.dumps(conf))

    def run(self, verb: str, netns: str, pod: dict[str, Any]) -> CniRun:
        meta = pod["metadata"]
        env = {
            **self.fake_node.env(),
            "SRIOV_CNI_DATA_DIR": str(self.tmp / "sriov-data"),
            "CNI_ARGS": pod_args(meta["namespace"], meta["name"], meta["uid"]),
        }
        return run_cnitool(
            self.cnitool, [verb, "shimnet", netns], net_dir=self.net_dir, bin_dir=self.bin_dir, env=env
        )
