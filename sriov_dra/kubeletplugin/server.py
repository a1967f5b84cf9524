"""gRPC servers kubelet talks to: DRA v1 and v1beta1 (and, given a device health feed, the
resource-health stream) on ``dra.sock``, registration on ``-reg.sock``.

Kubelet discards a whole response on a gRPC error, so failures are reported per claim in the
response map and the RPC itself only fails on a malformed request. Calls are serialized like the
upstream helper does, so two prepares never race on the same hardware or checkpoint; an empty
request (the health check's) has nothing to race on and does not wait its turn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

from sriov_dra.kubeletplugin.api import ClaimRef, DeviceHealthFeed, NodeService, PrepareOutcome
from sriov_dra.kubeletplugin.gen import dra_v1_pb2, dra_v1beta1_pb2, pluginregistration_v1_pb2
from sriov_dra.kubeletplugin.resourcehealth import SERVICE as RESOURCE_HEALTH_SERVICE
from sriov_dra.kubeletplugin.resourcehealth import ResourceHealthStream
from sriov_dra.model import DRIVER_NAME

log = logging.getLogger(__name__)

# Kubelet picks the first entry it knows, so the newest API goes first.
SUPPORTED_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
_DRA_APIS: tuple[tuple[str, ModuleType], ...] = (
    ("k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", dra_v1_pb2),
    ("k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin", dra_v1beta1_pb2),
)


@dataclass(frozen=True)
class SocketPaths:
    """Where kubelet expects this driver's sockets."""

    registry_dir: Path
    plugins_dir: Path

    @property
    def plugin_dir(self) -> Path:
        return self.plugins_dir / DRIVER_NAME

    @property
    def dra_socket(self) -> Path:
        return self.plugin_dir / "dra.sock"

    @property
    def registration_socket(self) -> Path:
        return self.registry_dir / f"{DRIVER_NAME}-reg.sock"


# Pod starts on a busy node overlap; calls beyond the workers queue in gRPC, where the health
# check's empty request would wait behind them. Waiting threads cost little.
DRA_WORKERS = 32


class CallSerializer:
    """One kubelet call at a time, and how long the current one has held its turn (a call still
    running far past kubelet's 45 s deadline means the driver is wedged)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None

    def __enter__(self) -> None:
        self._lock.acquire()
        self._since = time.monotonic()

    def __exit__(self, *_exc: object) -> None:
        self._since = None
        self._lock.release()

    def held_for(self) -> float:
        """Seconds the running call has held its turn; 0 when none runs."""
        since = self._since
        return 0.0 if since is None else time.monotonic() - since


def _claims(request: Any) -> list[ClaimRef]:
    return [ClaimRef(namespace=c.namespace, name=c.name, uid=c.uid) for c in request.claims]


def _missing(uid: str) -> str:
    return f"claim {uid}: the driver produced no result; kubelet will retry"


_Method = tuple[Callable[[Any, grpc.ServicerContext], Any], Any, Any]


def unary_service(service_name: str, methods: Mapping[str, _Method]) -> grpc.GenericRpcHandler:
    """A gRPC service of unary methods: name -> (handler, request message, response message)."""
    return grpc.method_handlers_generic_handler(
        service_name,
        {
            name: grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString
            )
            for name, (fn, req, resp) in methods.items()
        },
    )


class _DraHandlers:
    """One API version's two RPCs, translating between its messages and NodeService."""

    def __init__(self, pb: ModuleType, service: NodeService, calls: CallSerializer) -> None:
        self._pb = pb
        self._service = service
        self._calls = calls

    def _turn(self, claims: Sequence[ClaimRef]) -> contextlib.AbstractContextManager[None]:
        return self._calls if claims else contextlib.nullcontext()

    def prepare(self, request: Any, _context: grpc.ServicerContext) -> Any:
        claims = _claims(request)
        with self._turn(claims):
            outcomes: Mapping[str, PrepareOutcome] = self._service.prepare(claims)
        response = self._pb.NodePrepareResourcesResponse()
        for claim in claims:
            outcome = outcomes.get(claim.uid, PrepareOutcome(error=_missing(claim.uid)))
            entry = response.claims[claim.uid]
            entry.error = outcome.error
            if not outcome.error:
                entry.devices.extend(
                    self._pb.Device(
                        request_names=list(d.request_names),
                        pool_name=d.pool,
                        device_name=d.device,
                        cdi_device_ids=list(d.cdi_device_ids),
                    )
                    for d in outcome.devices
                )
        return response

    def unprepare(self, request: Any, _context: grpc.ServicerContext) -> Any:
        claims = _claims(request)
        with self._turn(claims):
            errors = self._service.unprepare(claims)
        response = self._pb.NodeUnprepareResourcesResponse()
        for claim in claims:
            response.claims[claim.uid].error = errors.get(claim.uid, _missing(claim.uid))
        return response

    def generic_handler(self, service_name: str) -> grpc.GenericRpcHandler:
        pb = self._pb
        return unary_service(
            service_name,
            {
                "NodePrepareResources": (
                    self.prepare,
                    pb.NodePrepareResourcesRequest,
                    pb.NodePrepareResourcesResponse,
                ),
                "NodeUnprepareResources": (
                    self.unprepare,
                    pb.NodeUnprepareResourcesRequest,
                    pb.NodeUnprepareResourcesResponse,
                ),
            },
        )


class Registration:
    """Answers kubelet's plugin watcher and remembers what kubelet said about the registration."""

    def __init__(self, endpoint: Path, services: Sequence[str] = ()) -> None:
        self._endpoint = endpoint
        # Kubelet 1.36 streams health from every plugin; 1.37 only from one that lists the service.
        self._versions = [*SUPPORTED_VERSIONS, *services]
        self._registered = threading.Event()
        self.error = ""

    def wait_registered(self, timeout: float) -> bool:
        return self._registered.wait(timeout)

    @property
    def registered(self) -> bool:
        """Kubelet's last word on the registration was yes."""
        return self._registered.is_set()

    def get_info(self, _request: Any, _context: grpc.ServicerContext) -> Any:
        return pluginregistration_v1_pb2.PluginInfo(
            type="DRAPlugin",
            name=DRIVER_NAME,
            endpoint=str(self._endpoint),
            supported_versions=list(self._versions),
        )

    def notify(self, request: Any, context: grpc.ServicerContext) -> Any:
        if request.plugin_registered:
            self.error = ""
            self._registered.set()
        else:
            self.error = request.error
            self._registered.clear()
            log.error("kubelet rejected the plugin registration: %s", request.error)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"registration failed: {request.error}")
        return pluginregistration_v1_pb2.RegistrationStatusResponse()

    def generic_handler(self) -> grpc.GenericRpcHandler:
        pb = pluginregistration_v1_pb2
        return unary_service(
            "pluginregistration.Registration",
            {
                "GetInfo": (self.get_info, pb.InfoRequest, pb.PluginInfo),
                "NotifyRegistrationStatus": (
                    self.notify,
                    pb.RegistrationStatus,
                    pb.RegistrationStatusResponse,
                ),
            },
        )


def _serve(socket: Path, handlers: Sequence[grpc.GenericRpcHandler], workers: int = 4) -> grpc.Server:
    socket.parent.mkdir(parents=True, exist_ok=True, mode=0o750)
    # A leftover socket from a crashed run would make bind fail; nothing else lives at this path.
    if socket.is_socket():
        socket.unlink()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers(tuple(handlers))
    if server.add_insecure_port(f"unix://{socket}") == 0:
        raise OSError(f"cannot listen on {socket}")
    server.start()
    return server


class KubeletPlugin:
    """Both kubelet-facing servers. The DRA socket is served before the registration socket
    appears, because kubelet dials the endpoint as soon as it sees the registration."""

    def __init__(
        self, paths: SocketPaths, service: NodeService, health: DeviceHealthFeed | None = None
    ) -> None:
        self.paths = paths
        self._health = None if health is None else ResourceHealthStream(health)
        self.registration = Registration(
            paths.dra_socket, () if self._health is None else (RESOURCE_HEALTH_SERVICE,)
        )
        self.calls = CallSerializer()
        handlers = [_DraHandlers(pb, service, self.calls).generic_handler(name) for name, pb in _DRA_APIS]
        if self._health is not None:
            handlers.append(self._health.generic_handler())
        self._dra = _serve(paths.dra_socket, handlers, DRA_WORKERS)
        self._reg_lock = threading.Lock()
        self._stopped = False
        try:
            self._reg = _serve(paths.registration_socket, [self.registration.generic_handler()])
        except BaseException:
            self._dra.stop(None)
            raise

    def reannounce(self) -> None:
        """Serve the registration socket anew, so kubelet's plugin watcher sees it created again.

        kubelet's plugin watcher can miss a socket: in a soak, a driver restarted two seconds
        after its kubelet stayed unregistered. Upstream's driver exits after 30 s unregistered so
        that its DaemonSet restarts it; a new socket has that effect without the restart."""
        with self._reg_lock:
            if self._stopped:
                return
            self._reg.stop(None).wait()
            self._reg = _serve(self.paths.registration_socket, [self.registration.generic_handler()])

    def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving and remove both sockets; kubelet de-registers on socket removal."""
        if self._health is not None:
            self._health.stop()
        with self._reg_lock:
            self._stopped = True
            self._reg.stop(grace).wait()
        self._dra.stop(grace).wait()
        for sock in (self.paths.registration_socket, self.paths.dra_socket):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sock)
