"""The kubelet-facing gRPC servers over real unix sockets, driven by the fake kubelet."""

import os
import socket
from collections.abc import Mapping, Sequence

import grpc
import pytest

from sriov_dra.kubeletplugin.api import ClaimRef, DeviceResult, PrepareOutcome
from sriov_dra.kubeletplugin.gen import health_v1_pb2
from sriov_dra.kubeletplugin.health import HealthServer
from sriov_dra.kubeletplugin.server import KubeletPlugin, SocketPaths
from tests.support.kubelet import health_check


class RecordingService:
    def __init__(self) -> None:
        self.prepared: list[list[ClaimRef]] = []

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        self.prepared.append(list(claims))
        out = {}
        for c in claims:
            if c.name == "bad":
                out[c.uid] = PrepareOutcome(error="BadClaim: it is bad")
            elif c.name != "forgotten":
                out[c.uid] = PrepareOutcome(
                    devices=(
                        DeviceResult(("vf",), "node-a", "0000-17-00-1", (f"x/vf={c.uid}-0000-17-00-1",)),
                    )
                )
        return out

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        return {c.uid: "" for c in claims if c.name != "forgotten"}


@pytest.fixture
def plugin(kubelet_dirs):
    service = RecordingService()
    p = KubeletPlugin(SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins), service)
    yield p, service
    p.stop(0)


def test_registration_handshake_advertises_v1_first(plugin, kubelet_dirs, fake_kubelet_factory) -> None:
    p, _ = plugin
    kubelet = fake_kubelet_factory(kubelet_dirs.registry)
    info = kubelet.register()
    assert info.type == "DRAPlugin"
    assert info.name == "sriovnetwork.k8snetworkplumbingwg.io"
    assert info.endpoint == str(kubelet_dirs.plugins / "sriovnetwork.k8snetworkplumbingwg.io" / "dra.sock")
    assert info.supported_versions == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
    assert kubelet.version == "v1"
    assert p.registration.wait_registered(5)


def test_rejected_registration_is_recorded(plugin, kubelet_dirs, fake_kubelet_factory) -> None:
    p, _ = plugin
    kubelet = fake_kubelet_factory(kubelet_dirs.registry)
    with pytest.raises(grpc.RpcError):
        kubelet.notify(False, "version skew")
    assert p.registration.error == "version skew"
    assert not p.registration.wait_registered(0)


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_every_claim_gets_an_entry_and_failures_stay_per_claim(
    plugin, kubelet_dirs, fake_kubelet_factory, version
) -> None:
    kubelet = fake_kubelet_factory(kubelet_dirs.registry)
    kubelet.register()
    claims = [("ns", "good", "u1"), ("ns", "bad", "u2"), ("ns", "forgotten", "u3")]
    resp = kubelet.prepare(claims, version)
    assert set(resp) == {"u1", "u2", "u3"}
    assert resp["u1"].error == ""
    (dev,) = resp["u1"].devices
    assert (list(dev.request_names), dev.pool_name, dev.device_name) == (["vf"], "node-a", "0000-17-00-1")
    assert list(dev.cdi_device_ids) == ["x/vf=u1-0000-17-00-1"]
    assert resp["u2"].error == "BadClaim: it is bad" and not resp["u2"].devices
    assert "no result" in resp["u3"].error
    un = kubelet.unprepare(claims, version)
    assert set(un) == {"u1", "u2", "u3"}
    assert un["u1"].error == "" and "no result" in un["u3"].error


def test_empty_request_reaches_the_service(plugin, kubelet_dirs, fake_kubelet_factory) -> None:
    _, service = plugin
    kubelet = fake_kubelet_factory(kubelet_dirs.registry)
    kubelet.register()
    assert kubelet.prepare([]) == {}
    assert service.prepared == [[]]


def test_stale_sockets_are_replaced_and_removed_on_stop(kubelet_dirs) -> None:
    paths = SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins)
    paths.plugin_dir.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(paths.dra_socket))
    stale.close()
    p = KubeletPlugin(paths, RecordingService())
    assert paths.dra_socket.is_socket() and paths.registration_socket.is_socket()
    p.stop(0)
    assert not paths.dra_socket.exists() and not paths.registration_socket.exists()


def _check(port: int, service: str = "") -> int:
    return health_check(port, service)


def test_health_check_probes_both_sockets(kubelet_dirs) -> None:
    paths = SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins)
    p = KubeletPlugin(paths, RecordingService())
    health = HealthServer(paths, 0)
    try:
        assert _check(health.port) == health_v1_pb2.HealthCheckResponse.SERVING
        assert _check(health.port, "liveness") == health_v1_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as err:
            _check(health.port, "other")
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        p.stop(0)
        assert _check(health.port) == health_v1_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        health.stop()
        p.stop(0)


def test_health_check_listens_on_its_host_only(kubelet_dirs) -> None:
    """HEALTHCHECK_HOST: the node's address, where kubelet probes a host-network Pod; another
    address of the node (127.0.0.2 is loopback too) gets no answer, so two nodes sharing one
    network namespace, as on the test bed, can each probe their own driver on the same port."""
    paths = SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins)
    p = KubeletPlugin(paths, RecordingService())
    health = HealthServer(paths, 0, host="127.0.0.1")
    try:
        assert health_check(health.port, host="127.0.0.1") == health_v1_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as err:
            health_check(health.port, host="127.0.0.2", timeout=2.0)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        health.stop()
        p.stop(0)


def test_reannounce_serves_a_new_registration_socket_kubelet_can_register_on(
    plugin, kubelet_dirs, fake_kubelet_factory
) -> None:
    p, _ = plugin
    # A second link keeps the old socket's inode taken, so a socket made anew cannot reuse it.
    old = kubelet_dirs.registry.parent / "old-reg.sock"
    os.link(p.paths.registration_socket, old)
    p.reannounce()
    assert p.paths.registration_socket.stat().st_ino != old.stat().st_ino, (
        "the watcher would see no new socket"
    )
    fake_kubelet_factory(kubelet_dirs.registry).register()
    assert p.registration.wait_registered(5)


def test_reannounce_after_stop_leaves_no_socket(kubelet_dirs) -> None:
    p = KubeletPlugin(SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins), RecordingService())
    p.stop(0)
    p.reannounce()
    assert not p.paths.registration_socket.exists()
