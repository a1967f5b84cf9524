"""The kubelet's DRA resource-health stream (KEP-4680, v1alpha1 in kubelet 1.36) on ``dra.sock``.

Kubelet opens NodeWatchResources once per registered plugin and reads until the stream ends. Each
message carries every device (a device left out reads as Unknown once its timeout lapses), and
kubelet stamps its own receipt time, so the whole list is re-sent every RESEND_SECONDS, well
inside TIMEOUT_SECONDS, as well as at once on every change.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, Final

import grpc

from sriov_dra.kubeletplugin.api import DeviceHealthFeed
from sriov_dra.kubeletplugin.gen import dra_health_v1alpha1_pb2 as pb

SERVICE: Final = "v1alpha1.DRAResourceHealth"
TIMEOUT_SECONDS: Final = 30
RESEND_SECONDS: Final = 10.0
# How often a waiting stream looks whether kubelet left or the server stops.
_WAKE_SECONDS: Final = 1.0


class ResourceHealthStream:
    """Serves NodeWatchResources from a DeviceHealthFeed."""

    def __init__(self, feed: DeviceHealthFeed) -> None:
        self._feed = feed
        self._stopping = threading.Event()

    def stop(self) -> None:
        """End every open stream at its next wake-up (kubelet retries on the next plugin)."""
        self._stopping.set()

    def watch(self, _request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        version, sent = -1, 0.0
        while context.is_active() and not self._stopping.is_set():
            latest, reports = self._feed.reports(version, _WAKE_SECONDS)
            if latest == version and time.monotonic() - sent < RESEND_SECONDS:
                continue
            version, sent = latest, time.monotonic()
            yield pb.NodeWatchResourcesResponse(
                devices=[
                    pb.DeviceHealth(
                        device=pb.DeviceIdentifier(pool_name=r.pool, device_name=r.device),
                        health=pb.HEALTHY if r.healthy else pb.UNHEALTHY,
                        last_updated_time=int(time.time()),
                        health_check_timeout_seconds=TIMEOUT_SECONDS,
                        message=r.message,
                    )
                    for r in reports
                ]
            )

    def generic_handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "NodeWatchResources": grpc.unary_stream_rpc_method_handler(
                    self.watch,
                    request_deserializer=pb.NodeWatchResourcesRequest.FromString,
                    response_serializer=pb.NodeWatchResourcesResponse.SerializeToString,
                )
            },
        )
