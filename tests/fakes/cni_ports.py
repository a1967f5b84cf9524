"""In-memory doubles of the CNI side's ports (cni_shim.ports): processes, the API, time, logs, routes."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cni_shim.errors import ApiError, CniError

# What a plugin answers to VERSION unless a test narrows it.
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
    list_errors: list[int] = field(default_factory=list)
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
            raise ApiError("injected", self.pod_errors.pop(0))
        pod = self.pods.get((namespace, name))
        return copy.deepcopy(pod) if pod is not None else None

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads.append(("nad", namespace, name))
        nad = self.nads.get((namespace, name))
        return copy.deepcopy(nad) if nad is not None else None

    def list_nads(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        self.reads.append(("nads", namespace, label_selector))
        if self.list_errors:
            raise ApiError("injected", self.list_errors.pop(0))
        wanted = dict(term.split("=", 1) for term in label_selector.split(","))
        return [
            copy.deepcopy(nad)
            for (ns, _), nad in sorted(self.nads.items())
            if ns == namespace
            and all((nad["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]

    def replace_pod_status(self, pod: Mapping[str, Any]) -> None:
        if self.conflicts:
            self.conflicts -= 1
            raise ApiError("conflict", 409)
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
class FakeNodeDevices:
    """A node's VFs by (kind, name) -> VF PCI, and device-plugin allocations by (Pod UID, resource)."""

    vfs: dict[tuple[str, str], str] = field(default_factory=dict)
    allocations: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    asked: list[tuple[str, str]] = field(default_factory=list)

    def add_vf(self, pci: str, netdev: str = "") -> None:
        self.vfs[("pci", pci)] = pci
        if netdev:
            self.vfs[("netdev", netdev)] = pci

    def virtual_function(self, kind: str, value: str) -> str | None:
        self.asked.append((kind, value))
        return self.vfs.get((kind, value))

    def allocated(self, pod_uid: str, resource_name: str) -> frozenset[str]:
        self.asked.append(("allocation", f"{pod_uid}/{resource_name}"))
        return self.allocations.get((pod_uid, resource_name), frozenset())


@dataclass
class FakePodResources:
    """The kubelet's device-plugin allocations by (namespace, name): (resource, device IDs) pairs."""

    pods: dict[tuple[str, str], list[tuple[str, list[str]]]] = field(default_factory=dict)
    failure: Exception | None = None
    asked: list[tuple[str, str, str]] = field(default_factory=list)

    def allocations(self, namespace: str, name: str, uid: str) -> list[tuple[str, list[str]]]:
        self.asked.append((namespace, name, uid))
        if self.failure is not None:
            raise self.failure
        return [(r, list(ids)) for r, ids in self.pods.get((namespace, name), [])]
