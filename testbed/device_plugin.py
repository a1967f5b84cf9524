"""A real kubelet device plugin for the bed: the SR-IOV network device plugin's part in the legacy
resourceName path (issue #33), for a pool of the fake node's VFs.

``LegacyVfPlugin`` serves the kubelet's device-plugin API v1beta1 (testbed/protos, generated into
testbed/gen by scripts/gen-protos) on a unix socket in the kubelet's device-plugins directory and
registers there with the kubelet under ``openshift.io/legacy_vfs``. It advertises its VFs (PCI
addresses as device IDs, each on its NUMA node), answers Allocate with the SR-IOV plugin's
``PCIDEVICE_<RESOURCE>`` variable, and writes each VF's device-info file
(``<dir>/<resource with - for />-<pci>-device.json``, ``{"type":"pci","version":"1.1.0","pci":
{"pci-address": ...}}``) as that plugin does, for the CNI side to copy. The kubelet records the
allocations in its checkpoint and answers them over pod-resources: what cni-shim reads. Those
VFs must be excluded from the DRA driver's policy (spec 18.1: one provider per VF inventory).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from sriov_contract.errors import ReasonedError
from testbed.gen import deviceplugin_v1beta1_pb2 as pb
from testbed.sriov_topology import VfRecord

LEGACY_RESOURCE = "openshift.io/legacy_vfs"
DEVICE_PLUGIN_DEVINFO_DIR = Path("/var/run/k8s.cni.cncf.io/devinfo/dp")
API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
_SERVICE = "v1beta1.DevicePlugin"
_REGISTRATION = "/v1beta1.Registration/Register"


def device_info_path(devinfo_dir: Path, resource: str, pci: str) -> Path:
    return devinfo_dir / f"{resource.replace('/', '-')}-{pci.replace('/', '-')}-device.json"


def env_name(resource: str) -> str:
    """The SR-IOV device plugin's variable: PCIDEVICE_ + the resource name, upper case, - . / as _."""
    return "PCIDEVICE_" + "".join(c if c.isalnum() else "_" for c in resource).upper()


class LegacyVfPlugin:
    """``LegacyVfPlugin(plugins_dir, vfs)`` then ``start()`` (serve, write device-info, register);
    ``stop()`` stops serving and removes its socket and device-info files."""

    def __init__(
        self,
        plugins_dir: Path,
        vfs: Sequence[VfRecord],
        *,
        resource: str = LEGACY_RESOURCE,
        devinfo_dir: Path = DEVICE_PLUGIN_DEVINFO_DIR,
        endpoint: str = "legacy-vfs.sock",
    ) -> None:
        self.plugins_dir, self.vfs, self.resource = plugins_dir, tuple(vfs), resource
        self.devinfo_dir, self.endpoint = devinfo_dir, endpoint
        self.socket = plugins_dir / endpoint
        self.allocated: list[list[str]] = []  # each Allocate's device IDs, per container, for tests
        self.watching = threading.Event()  # the kubelet opened ListAndWatch
        self._stopped = threading.Event()
        self._server: grpc.Server | None = None

    @property
    def pcis(self) -> list[str]:
        return [vf.pci for vf in self.vfs]

    def start(self) -> None:
        self.devinfo_dir.mkdir(parents=True, exist_ok=True)
        for vf in self.vfs:
            doc = {"type": "pci", "version": "1.1.0", "pci": {"pci-address": vf.pci}}
            device_info_path(self.devinfo_dir, self.resource, vf.pci).write_text(json.dumps(doc))
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((self._handler(),))
        server.add_insecure_port(f"unix://{self.socket}")
        server.start()
        self._server = server
        self._register()

    def _register(self) -> None:
        kubelet = self.plugins_dir / KUBELET_SOCKET
        with grpc.insecure_channel(f"unix://{kubelet}") as channel:
            register = channel.unary_unary(
                _REGISTRATION,
                request_serializer=pb.RegisterRequest.SerializeToString,
                response_deserializer=pb.Empty.FromString,
            )
            try:
                register(
                    pb.RegisterRequest(
                        version=API_VERSION,
                        endpoint=self.endpoint,
                        resource_name=self.resource,
                        options=pb.DevicePluginOptions(),
                    ),
                    timeout=10,
                    wait_for_ready=True,
                )
            except grpc.RpcError as exc:
                raise ReasonedError(
                    "DevicePluginNotRegistered",
                    f"the kubelet at {kubelet} refused {self.resource}: {exc}",
                ) from exc

    def _handler(self) -> grpc.GenericRpcHandler:
        def unary(fn: Any, req: Any, resp: Any) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString
            )

        return grpc.method_handlers_generic_handler(
            _SERVICE,
            {
                "GetDevicePluginOptions": unary(
                    lambda _r, _c: pb.DevicePluginOptions(), pb.Empty, pb.DevicePluginOptions
                ),
                "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                    self._list_and_watch,
                    request_deserializer=pb.Empty.FromString,
                    response_serializer=pb.ListAndWatchResponse.SerializeToString,
                ),
                "GetPreferredAllocation": unary(
                    lambda _r, _c: pb.PreferredAllocationResponse(),
                    pb.PreferredAllocationRequest,
                    pb.PreferredAllocationResponse,
                ),
                "Allocate": unary(self._allocate, pb.AllocateRequest, pb.AllocateResponse),
                "PreStartContainer": unary(
                    lambda _r, _c: pb.PreStartContainerResponse(),
                    pb.PreStartContainerRequest,
                    pb.PreStartContainerResponse,
                ),
            },
        )

    def _list_and_watch(self, _request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self.watching.set()
        yield pb.ListAndWatchResponse(
            devices=[
                pb.Device(
                    ID=vf.pci, health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=vf.numa)])
                )
                for vf in self.vfs
            ]
        )
        # The kubelet keeps the stream open; the inventory never changes until the plugin stops.
        while context.is_active() and not self._stopped.wait(0.5):
            pass

    def _allocate(self, request: Any, _context: grpc.ServicerContext) -> Any:
        response = pb.AllocateResponse()
        for container in request.container_requests:
            ids = list(container.devices_ids)
            self.allocated.append(ids)
            answer = response.container_responses.add()
            answer.envs[env_name(self.resource)] = ",".join(ids)
        return response

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.stop(None).wait()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        for vf in self.vfs:
            with contextlib.suppress(FileNotFoundError):
                device_info_path(self.devinfo_dir, self.resource, vf.pci).unlink()
