"""Fixtures around the real cni-shim-daemon (testbed/cni_daemon.py), optionally against the test bed.

Fixtures: ``cni_daemon`` (factory: ``cni_daemon(config, kube=True)`` starts one daemon and
returns a :class:`DaemonProc`; all are killed after the test), ``daemon_kubeconfig`` (session:
the daemon's own identity, user ``cni-shim-daemon``, with the deployment's Pod/NAD rights) and
``thick_bin`` (a CNI bin dir with the test plugins plus ``cni-shim``). Helpers:
:func:`shim_bin_dir`, :func:`run_shim`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from testbed.cni_daemon import DAEMON_RULES, DAEMON_USER, SHIM, DaemonProc
from tests.support.cni import CniRun, run_cni


@pytest.fixture(scope="session")
def daemon_kubeconfig(testbed: Any) -> Path:
    path = testbed.issue_identity("cni-shim-daemon", DAEMON_USER)
    testbed.grant(DAEMON_USER, DAEMON_RULES)
    return Path(path)


@pytest.fixture
def cni_daemon(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., DaemonProc]]:
    started: list[DaemonProc] = []

    def start(config: Mapping[str, Any], *, kube: bool = True, node_name: str = "") -> DaemonProc:
        conf = dict(config)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        if kube:
            bed = request.getfixturevalue("testbed")
            conf.setdefault("kubeconfig", str(request.getfixturevalue("daemon_kubeconfig")))
            env["NODE_NAME"] = node_name or bed.node_name
        workdir = tmp_path / f"daemon{len(started)}"
        workdir.mkdir()
        daemon = DaemonProc(workdir, conf, env)
        started.append(daemon)
        return daemon.start()

    yield start
    # Each daemon is reaped even when reaping another one failed.
    with contextlib.ExitStack() as reap:
        for daemon in started:
            reap.callback(daemon.cleanup)


def shim_bin_dir(out: Path, plugins: Path, *shim_names: str, recorder_as_sriov: bool = True) -> Path:
    """The test plugins plus `cni-shim` under each of `shim_names`; with `recorder_as_sriov` the
    recorder stands in for `sriov` (for suites with no VF)."""
    out.mkdir()
    for entry in plugins.iterdir():
        if not (recorder_as_sriov and entry.name == "sriov"):
            (out / entry.name).symlink_to(entry)
    if recorder_as_sriov:
        (out / "sriov").symlink_to(plugins / "recorder")
    for name in shim_names:
        (out / name).symlink_to(SHIM)
    return out


@pytest.fixture
def thick_bin(tmp_path: Path, cni_bin_dir: Path) -> Path:
    return shim_bin_dir(tmp_path / "bin", cni_bin_dir, "cni-shim")


# The runtime's environment for one ADD, as unit tests of the thick shim's forwarding send it.
SHIM_ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "c1",
    "CNI_NETNS": "/run/netns/x",
    "CNI_IFNAME": "eth0",
    "CNI_ARGS": "",
    "CNI_PATH": "/opt/cni/bin",
}


def pod_args(namespace: str, name: str, uid: str = "") -> str:
    args = f"IgnoreUnknown=1;K8S_POD_NAMESPACE={namespace};K8S_POD_NAME={name};K8S_POD_INFRA_CONTAINER_ID=sb"
    return args + (f";K8S_POD_UID={uid}" if uid else "")


# A netns path that exists (ADD refuses one that does not, as Multus does); the recording
# delegates these helpers run never enter it.
SANDBOX = "/proc/self/ns/net"


def run_shim(
    bin_dir: Path, command: str, conf: Mapping[str, Any], cid: str, args: str, netns: str = SANDBOX
) -> CniRun:
    return run_cni(
        "cni-shim",
        command,
        conf,
        bin_dir=bin_dir,
        container_id=cid,
        netns=netns,
        ifname="eth0",
        cni_args=args,
    )
