"""Fakes and fixtures for the cni-shim core: an in-memory API, a scripted plugin executor, a clock.

Fixtures: ``shim`` (a ShimHarness on tmp_path with fake adapters), ``veth`` (a host veth pair). The fakes are for pure unit
tests; integration tests drive the real executable against the real API server and plugins.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cni_shim import main
from cni_shim.core.netconf import NetConf
from cni_shim.handler import Services
from cni_shim.node.cache import FileCacheStore
from cni_shim.node.conffiles import NodeConfFiles
from cni_shim.ports import Fanout
from sriov_lib.fanout import run as run_at_once
from tests.fakes.cni_ports import (
    FakeClock,
    FakeExecutor,
    FakeKube,
    FakeNodeDevices,
    FakePodResources,
    FakeRoutes,
    ListLog,
)

T = TypeVar("T")


@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout) if self.stdout.strip() else None


def in_order(tasks: Sequence[Callable[[], T]], limit: int) -> list[T | BaseException]:
    """A fanout that runs a wave's tasks one after another, in the wave's order."""
    return run_at_once(tasks, 1)


class FakeDeviceInfoFiles(dict[str, bytes]):
    """Device-info files in memory (path -> bytes), with every write and removal in order."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, str]] = []

    def read(self, path: str) -> bytes | None:
        return self.get(path)

    def write(self, path: str, data: bytes) -> None:
        self.ops.append(("write", path))
        self[path] = data

    def remove(self, path: str) -> None:
        self.ops.append(("remove", path))
        self.pop(path, None)


class ShimHarness:
    """Runs the real protocol shell and core in-process with fake adapters."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cni_dir = tmp / "cni"
        self.conf_dir = tmp / "confdir"
        self.conf_dir.mkdir()
        self.executor = FakeExecutor()
        self.kube: FakeKube | None = FakeKube()
        self.clock = FakeClock()
        self.log = ListLog()
        self.routes = FakeRoutes()
        # CNI_NETNS paths that do not exist (every other path stands for a live netns).
        self.missing_netns: set[str] = set()
        # The node's VFs and device-plugin allocations; None: a node without SR-IOV.
        self.devices: FakeNodeDevices | None = None
        # The kubelet's device-plugin allocations (the resourceName path).
        self.pod_resources = FakePodResources()
        # How a wave of delegates runs: by default one after another in the wave's order, so the
        # fake executor's call list is deterministic; the concurrency tests plug in their orders.
        self.fanout: Fanout = in_order
        # Device-info files: the device plugins' and the attachments' CNIDeviceInfoFile.
        self.device_info_files = FakeDeviceInfoFiles()

    def services(self, env: Mapping[str, str]) -> Services:
        def kube_for(conf: NetConf) -> FakeKube | None:
            return self.kube

        return Services(
            executor=self.executor,
            store_for=FileCacheStore,
            kube_for=kube_for,
            log_for=lambda conf: self.log,
            clock=self.clock,
            delegate_env={"PATH": os.environ.get("PATH", "")},
            routes=self.routes,
            conf_files=NodeConfFiles(),
            netns_problem=lambda path: (
                f'failed to Statfs "{path}": no such file or directory'
                if path in self.missing_netns
                else None
            ),
            devices_for=None if self.devices is None else self._devices,
            pod_resources_for=lambda conf: self.pod_resources,
            fanout=self.fanout,
            device_info_files=self.device_info_files,
        )

    def _devices(self, conf: NetConf) -> FakeNodeDevices:
        assert self.devices is not None
        return self.devices

    def conf(self, **overrides: Any) -> dict[str, Any]:
        base: dict[str, Any] = {
            "cniVersion": "1.0.0",
            "name": "multus-cni-network",
            "type": "multus",
            "kubeconfig": "/fake",
            "cniDir": str(self.cni_dir),
            "confDir": str(self.conf_dir),
            "binDir": str(self.tmp / "bin"),
            "delegates": [{"cniVersion": "1.0.0", "name": "cluster", "type": "ptp"}],
        }
        base.update(overrides)
        return base

    def run(
        self,
        command: str,
        conf: Mapping[str, Any] | bytes,
        *,
        container_id: str = "c1",
        ifname: str = "eth0",
        netns: str = "/run/netns/t1",
        args: str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=pod1;K8S_POD_UID=uid-1",
        env: Mapping[str, str] | None = None,
    ) -> Outcome:
        full = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": container_id,
            "CNI_NETNS": netns,
            "CNI_IFNAME": ifname,
            "CNI_ARGS": args,
            "CNI_PATH": "/opt/cni/bin",
            **(env or {}),
        }
        full = {k: v for k, v in full.items() if v is not None}
        stdin = conf if isinstance(conf, bytes) else json.dumps(conf).encode()
        status, out, err = main.run(full, lambda: stdin, self.services)
        return Outcome(status, out, err)

    def plan_doc(self, container_id: str = "c1") -> dict[str, Any] | None:
        path = self.cni_dir / container_id
        return json.loads(path.read_text()) if path.exists() else None


@pytest.fixture
def shim(tmp_path: Path) -> ShimHarness:
    return ShimHarness(tmp_path)


@pytest.fixture
def veth() -> Iterator[str]:
    """A host veth pair; host-device can move its first end into a Pod netns. Removed after."""
    name = f"hd{secrets.token_hex(3)}"
    subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p"], check=True)
    yield name
    subprocess.run(["ip", "link", "del", name], check=False, capture_output=True)
    subprocess.run(["ip", "link", "del", f"{name}p"], check=False, capture_output=True)
