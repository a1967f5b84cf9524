"""The kubelet's side of a DRA plugin's life, over the plugin's real unix sockets: find the
driver's registration socket, perform the kubelet's registration handshake, and call
NodePrepare/NodeUnprepareResources as the kubelet does (``FakeKubelet``); and the kubelet's
directories a driver is pointed at (``KubeletDirs``).

Used by the simulated kubelet (testbed/kubelet_sim.py), the bench, and the driver suites'
fixtures (tests/support/kubelet.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

# Versions this fake kubelet understands, like a 1.34+ kubelet.
KNOWN_VERSIONS = {"v1.DRAPlugin": "v1", "v1beta1.DRAPlugin": "v1beta1"}


# Imported lazily: the fixture plugin tests/support/kubelet.py loads this module in every pytest run,
# and the stubs exist only after `make gen`.
def _pb(version: str) -> Any:
    from sriov_dra.kubeletplugin.gen import dra_v1_pb2, dra_v1beta1_pb2  # noqa: PLC0415

    return {"v1": dra_v1_pb2, "v1beta1": dra_v1beta1_pb2}[version]


def _reg_pb() -> Any:
    from sriov_dra.kubeletplugin.gen import pluginregistration_v1_pb2  # noqa: PLC0415

    return pluginregistration_v1_pb2


@dataclass
class PluginInfo:
    type: str
    name: str
    endpoint: str
    supported_versions: list[str]


def _unary(channel: grpc.Channel, path: str, response_cls: Any) -> Any:
    return channel.unary_unary(
        path,
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response_cls.FromString,
    )


def wait_for_socket(directory: Path, suffix: str, timeout: float) -> Path:
    """Poll until a non-hidden unix socket ending in `suffix` exists (kubelet's watcher rule)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in sorted(directory.glob(f"*{suffix}")) if directory.is_dir() else []:
            if not p.name.startswith(".") and p.is_socket():
                return p
        time.sleep(0.05)
    raise TimeoutError(f"no *{suffix} socket appeared in {directory} within {timeout}s")


class FakeKubelet:
    def __init__(self, registration_socket: Path) -> None:
        self.registration_socket = registration_socket
        self._reg = grpc.insecure_channel(f"unix://{registration_socket}")
        self.info: PluginInfo | None = None
        self.version = ""
        self._dra: grpc.Channel | None = None

    def register(self, within: float = 10.0) -> PluginInfo:
        """GetInfo (1 s deadline, as kubelet), choose the first known version, notify success.

        A socket file left by a killed driver refuses connections until the new process binds
        it; kubelet would wait for that re-creation event, so an unavailable plugin is retried
        until `within` seconds have passed.
        """
        pb = _reg_pb()
        get_info = _unary(self._reg, "/pluginregistration.Registration/GetInfo", pb.PluginInfo)
        deadline = time.monotonic() + within
        while True:
            try:
                raw = get_info(pb.InfoRequest(), timeout=1.0)
                break
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
        info = PluginInfo(raw.type, raw.name, raw.endpoint, list(raw.supported_versions))
        chosen = next((KNOWN_VERSIONS[v] for v in info.supported_versions if v in KNOWN_VERSIONS), "")
        ok = info.type == "DRAPlugin" and bool(chosen)
        self.notify(ok, "" if ok else f"no supported version in {info.supported_versions}")
        self.info, self.version = info, chosen
        self._dra = grpc.insecure_channel(f"unix://{info.endpoint or self.registration_socket}")
        return info

    def notify(self, registered: bool, error: str = "") -> None:
        pb = _reg_pb()
        _unary(
            self._reg,
            "/pluginregistration.Registration/NotifyRegistrationStatus",
            pb.RegistrationStatusResponse,
        )(pb.RegistrationStatus(plugin_registered=registered, error=error), timeout=5.0)

    def _call(self, method: str, claims: list[tuple[str, str, str]], version: str | None) -> dict[str, Any]:
        assert self._dra is not None, "register() first"
        v = version or self.version
        pb = _pb(v)
        req_cls = getattr(pb, f"{method}Request")
        resp_cls = getattr(pb, f"{method}Response")
        request = req_cls(claims=[pb.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in claims])
        response = _unary(self._dra, f"/k8s.io.kubelet.pkg.apis.dra.{v}.DRAPlugin/{method}", resp_cls)(
            request,
            timeout=45.0,  # kubelet's client call timeout
        )
        return dict(response.claims)

    def prepare(self, claims: list[tuple[str, str, str]], version: str | None = None) -> dict[str, Any]:
        """claims: (namespace, name, uid); returns claim UID -> NodePrepareResourceResponse."""
        return self._call("NodePrepareResources", claims, version)

    def unprepare(self, claims: list[tuple[str, str, str]], version: str | None = None) -> dict[str, Any]:
        return self._call("NodeUnprepareResources", claims, version)

    def close(self) -> None:
        self._reg.close()
        if self._dra is not None:
            self._dra.close()


@dataclass(frozen=True)
class KubeletDirs:
    root: Path
    registry: Path
    plugins: Path
    cdi: Path
