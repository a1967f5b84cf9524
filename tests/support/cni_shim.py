"""Fakes and fixtures for the cni-shim core: an in-memory API, a scripted plugin executor, a clock.

Fixtures: ``shim`` (a ShimHarness on tmp_path with fake adapters), ``veth`` (a host veth pair). The fakes are for pure unit
tests; integration tests drive the real executable against the real API server and plugins.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import secrets
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cni_shim import main
from cni_shim.core.netconf import NetConf
from cni_shim.errors import CniError, KubeApiError
from cni_shim.handler import Services
from cni_shim.node.cache import FileCacheStore
from sriov_contract import keys
from sriov_contract.identity import config_sha256, shadow_name_for

ALL_VERSIONS = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]


@dataclass
class Call:
    plugin: str
    command: str
    ifname: str
    env: dict[str, str]
    stdin: dict[str, Any]


@dataclass
class FakeExecutor:
    """Plugins answer from `results` (per plugin type) and fail per `failures[(type, command)]`."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[tuple[str, str], CniError] = field(default_factory=dict)
    supported: dict[str, list[str]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    on_call: Any = None

    def execute(self, plugin: str, search_path: Sequence[str], env: Mapping[str, str], stdin: bytes) -> bytes:
        command = env["CNI_COMMAND"]
        if command == "VERSION":
            return json.dumps(
                {"cniVersion": "1.1.0", "supportedVersions": self.supported.get(plugin, ALL_VERSIONS)}
            ).encode()
        if self.on_call is not None:
            self.on_call(plugin, command)
        self.calls.append(Call(plugin, command, env.get("CNI_IFNAME", ""), dict(env), json.loads(stdin)))
        if (plugin, command) in self.failures:
            raise self.failures[(plugin, command)]
        if command != "ADD":
            return b""
        doc = json.loads(stdin)
        result = copy.deepcopy(self.results.get(plugin)) or {
            "interfaces": [
                {"name": env["CNI_IFNAME"], "mac": "02:00:00:00:00:01", "sandbox": env["CNI_NETNS"]}
            ],
            "ips": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1", "interface": 0}],
        }
        result["cniVersion"] = doc["cniVersion"]
        return json.dumps(result).encode()

    def commands(self) -> list[tuple[str, str, str]]:
        return [(c.plugin, c.command, c.ifname) for c in self.calls]


@dataclass
class FakeKube:
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    nads: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    reads: list[tuple[str, str, str]] = field(default_factory=list)
    conflicts: int = 0
    pod_errors: list[int] = field(default_factory=list)
    status_writes: list[dict[str, Any]] = field(default_factory=list)
    pod_reads_live: bool = True

    def add_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        annotations: Mapping[str, str] | None = None,
        node: str = "node-a",
    ) -> dict[str, Any]:
        pod = {
            "metadata": {
                "namespace": namespace,
                "name": name,
                "uid": uid,
                "annotations": dict(annotations or {}),
                "resourceVersion": "1",
            },
            "spec": {"nodeName": node},
        }
        self.pods[(namespace, name)] = pod
        return pod

    def add_nad(
        self, namespace: str, name: str, config: Mapping[str, Any] | str, **meta: Any
    ) -> dict[str, Any]:
        text = config if isinstance(config, str) else json.dumps(config)
        nad = {
            "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}", **meta},
            "spec": {"config": text},
        }
        self.nads[(namespace, name)] = nad
        return nad

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append(("pod", namespace, name))
        if self.pod_errors:
            raise KubeApiError("injected", self.pod_errors.pop(0))
        pod = self.pods.get((namespace, name))
        return copy.deepcopy(pod) if pod is not None else None

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append(("nad", namespace, name))
        nad = self.nads.get((namespace, name))
        return copy.deepcopy(nad) if nad is not None else None

    def replace_pod_status(self, pod: Mapping[str, Any]) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise KubeApiError("conflict", 409)
        meta = pod["metadata"]
        self.pods[(meta["namespace"], meta["name"])] = copy.deepcopy(dict(pod))
        self.status_writes.append(copy.deepcopy(dict(pod)))


@dataclass
class FakeClock:
    now: float = 0.0
    sleeps: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class ListLog:
    lines: list[tuple[str, str]] = field(default_factory=list)

    def error(self, message: str) -> None:
        self.lines.append(("error", message))

    def warning(self, message: str) -> None:
        self.lines.append(("warning", message))

    def verbose(self, message: str) -> None:
        self.lines.append(("verbose", message))

    def debug(self, message: str) -> None:
        self.lines.append(("debug", message))


@dataclass
class FakeRoutes:
    calls: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)

    def replace_defaults(self, netns: str, ifname: str, gateways: Sequence[str]) -> None:
        self.calls.append((netns, ifname, tuple(gateways)))


@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout) if self.stdout.strip() else None


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
        )

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


# ---------------------------------------------------------------- managed shadows (spec 6.4)

POD_UID = "11111111-2222-3333-4444-555555555555"
CLAIM_UID = "22222222-3333-4444-5555-666666666666"
NODE_UID = "33333333-4444-5555-6666-777777777777"
SOURCE_UID = "44444444-5555-6666-7777-888888888888"
SHADOW_UID = "55555555-6666-7777-8888-999999999999"


def sriov_config(pci: str, name: str = "rail-a", **extra: Any) -> str:
    """A static sriov config as the driver renders it (compact, exact bytes)."""
    conf = {
        "cniVersion": "1.0.0",
        "name": name,
        "type": "sriov",
        "deviceID": pci,
        "ipam": {"type": "static", "addresses": [{"address": "192.0.2.10/24"}]},
        **extra,
    }
    return json.dumps(conf, separators=(",", ":"))


def managed_shadow(
    *,
    namespace: str,
    pod_name: str,
    pod_uid: str = POD_UID,
    node: str = "node-a",
    pci: str = "0000:03:00.1",
    interface: str = "dra0",
    seed: str = "a",
    config: str | None = None,
    shadow_uid: str = SHADOW_UID,
) -> dict[str, Any]:
    """A shadow NAD, its generated selection and registry entry, all mutually consistent."""
    attachment_id = hashlib.sha256(seed.encode()).hexdigest()
    name = shadow_name_for(attachment_id)
    text = config if config is not None else sriov_config(pci)
    digest = config_sha256(text.encode())
    binding = {
        "version": 1,
        "attachmentID": attachment_id,
        "podUID": pod_uid,
        "claimUID": CLAIM_UID,
        "nodeName": node,
        "nodeUID": NODE_UID,
        "source": {"namespace": namespace, "name": "rail-a-net", "uid": SOURCE_UID, "resourceVersion": "7"},
        "pciAddress": pci,
        "interface": interface,
        "configSHA256": digest,
    }
    nad = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": shadow_uid,
            "annotations": {keys.BINDING_ANNOTATION: json.dumps(binding, separators=(",", ":"))},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": pod_uid,
                    "blockOwnerDeletion": False,
                }
            ],
            "finalizers": [keys.PROTECTION_FINALIZER],
        },
        "spec": {"config": text},
    }
    entry = {
        "attachmentID": attachment_id,
        "claimUID": CLAIM_UID,
        "namespace": namespace,
        "name": name,
        "uid": shadow_uid,
        "interface": interface,
        "configSHA256": digest,
    }
    return {
        "nad": nad,
        "name": name,
        "selection": {"name": name, "namespace": namespace, "interface": interface},
        "entry": entry,
    }


def registry_annotation(pod_uid: str, entries: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({"version": 1, "podUID": pod_uid, "entries": list(entries)}, separators=(",", ":"))
