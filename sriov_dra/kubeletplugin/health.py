"""gRPC health endpoint (``--healthcheck-port``): SERVING only when kubelet could really use us.

Like upstream, a check dials our own sockets: GetInfo on the registration socket and an empty
NodePrepareResources on the DRA socket, so a wedged server reports NOT_SERVING. The empty request
skips the turn kubelet's calls wait for, so a busy driver still answers; a call that has held its
turn for WEDGED_AFTER (far beyond kubelet's 45 s deadline) makes the driver not alive either.

Services: "" and "liveness" are that; "readiness" also needs kubelet to have registered the
plugin (NotifyRegistrationStatus said so), so a DaemonSet rollout waits for the registration.
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc

from sriov_dra.kubeletplugin.gen import dra_v1beta1_pb2, health_v1_pb2, pluginregistration_v1_pb2
from sriov_dra.kubeletplugin.server import CallSerializer, Registration, SocketPaths, unary_service

LIVENESS = ("", "liveness")
READINESS = "readiness"
_PROBE_TIMEOUT = 5.0
WEDGED_AFTER = 300.0


def _call(socket: str, path: str, request: Any, response_cls: Any) -> None:
    with grpc.insecure_channel(f"unix://{socket}") as channel:
        channel.unary_unary(
            path,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response_cls.FromString,
        )(request, timeout=_PROBE_TIMEOUT)


class HealthServer:
    """Serves grpc.health.v1.Health/Check on a TCP port (0 picks a free one; see ``port``) of one
    address, or of every address when ``host`` is empty."""

    def __init__(
        self,
        paths: SocketPaths,
        port: int,
        *,
        host: str = "",
        registration: Registration | None = None,
        calls: CallSerializer | None = None,
    ) -> None:
        self._paths = paths
        self._registration = registration
        self._calls = calls
        # kubelet's liveness and readiness probes may arrive together.
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb = health_v1_pb2
        self._server.add_generic_rpc_handlers(
            (
                unary_service(
                    "grpc.health.v1.Health",
                    {"Check": (self.check, pb.HealthCheckRequest, pb.HealthCheckResponse)},
                ),
            )
        )
        address = f"[{host}]:{port}" if ":" in host else f"{host or '[::]'}:{port}"
        self.port = self._server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"cannot listen on health-check address {address}")
        self._server.start()

    def healthy(self) -> bool:
        """Alive: both sockets answer and no kubelet call is stuck."""
        if self._calls is not None and self._calls.held_for() > WEDGED_AFTER:
            return False
        return self._sockets_answer()

    def ready(self) -> bool:
        """Alive, and registered with kubelet."""
        return self._registration is not None and self._registration.registered and self.healthy()

    def _sockets_answer(self) -> bool:
        reg, dra = pluginregistration_v1_pb2, dra_v1beta1_pb2
        probes = (
            (
                self._paths.registration_socket,
                "/pluginregistration.Registration/GetInfo",
                reg.InfoRequest(),
                reg.PluginInfo,
            ),
            (
                self._paths.dra_socket,
                "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
                dra.NodePrepareResourcesRequest(),
                dra.NodePrepareResourcesResponse,
            ),
        )
        try:
            for socket, method, request, response in probes:
                _call(str(socket), method, request, response)
        except grpc.RpcError:
            return False
        return True

    def check(self, request: Any, context: grpc.ServicerContext) -> Any:
        pb = health_v1_pb2.HealthCheckResponse
        if request.service == READINESS:
            good = self.ready()
        elif request.service in LIVENESS:
            good = self.healthy()
        else:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown service {request.service!r}")
        return pb(status=pb.SERVING if good else pb.NOT_SERVING)

    def stop(self) -> None:
        self._server.stop(None).wait()
