"""The kubelet's DRA resource-health stream on dra.sock, read the way kubelet 1.36 reads it."""

import threading
from collections.abc import Sequence

import grpc

from sriov_dra.kubeletplugin.api import DeviceHealthReport
from sriov_dra.kubeletplugin.gen import dra_health_v1alpha1_pb2 as pb
from sriov_dra.kubeletplugin.resourcehealth import TIMEOUT_SECONDS
from sriov_dra.kubeletplugin.server import KubeletPlugin, SocketPaths
from tests.support.kubelet import watch_resources
from tests.unit.sriov_dra.kubeletplugin.test_server_and_health import RecordingService


class Feed:
    def __init__(self) -> None:
        self.version = 1
        self.healthy = True
        self.changed = threading.Condition()

    def flip(self) -> None:
        with self.changed:
            self.version += 1
            self.healthy = not self.healthy
            self.changed.notify_all()

    def reports(self, after: int, timeout: float) -> tuple[int, Sequence[DeviceHealthReport]]:
        with self.changed:
            self.changed.wait_for(lambda: self.version != after, timeout)
            message = "" if self.healthy else "PFLinkDown: PF ens1f0 of VF 0000-17-00-1 is down"
            return self.version, [DeviceHealthReport("node-a", "0000-17-00-1", self.healthy, message)]


def test_stream_sends_the_full_list_at_once_and_on_every_change(kubelet_dirs, fake_kubelet_factory) -> None:
    feed = Feed()
    plugin = KubeletPlugin(SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins), RecordingService(), feed)
    try:
        info = fake_kubelet_factory(kubelet_dirs.registry).register()
        assert info.supported_versions == ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"]
        with watch_resources(plugin.paths.dra_socket) as stream:
            (first,) = next(stream).devices
            assert (first.device.pool_name, first.device.device_name) == ("node-a", "0000-17-00-1")
            assert first.health == pb.HEALTHY and first.health_check_timeout_seconds == TIMEOUT_SECONDS
            feed.flip()
            (second,) = next(stream).devices
            assert second.health == pb.UNHEALTHY and second.message.startswith("PFLinkDown: ")
    finally:
        plugin.stop(0)


def test_without_a_feed_the_service_is_neither_listed_nor_served(kubelet_dirs, fake_kubelet_factory) -> None:
    plugin = KubeletPlugin(SocketPaths(kubelet_dirs.registry, kubelet_dirs.plugins), RecordingService())
    try:
        info = fake_kubelet_factory(kubelet_dirs.registry).register()
        assert "v1alpha1.DRAResourceHealth" not in info.supported_versions
        with watch_resources(plugin.paths.dra_socket, timeout=10) as stream:
            try:
                next(stream)
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.UNIMPLEMENTED
            else:
                raise AssertionError("the stream answered without a feed")
    finally:
        plugin.stop(0)
