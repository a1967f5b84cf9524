"""The GPU stand-in: what the NVIDIA DRA driver does on a node, for the fake node's GPUs.

Its publication (:func:`gpu_slice`): the scheduler can only satisfy the spec 14.2 pairs
(``matchAttribute: resource.kubernetes.io/pcieRoot``) when GPUs are published with the same
PCIe-root attribute our driver publishes for its VFs. Its kubelet plugin (``GpuPlugin``), for the
real kubelet: that kubelet prepares every driver named in a claim's allocation and refuses to start
a Pod while any of them has no registered plugin ("DRA driver gpu.nvidia.com is not registered");
the simulated kubelet assumes other drivers' results are prepared elsewhere. The plugin registers
``gpu.nvidia.com`` through the kubelet's plugin registry over real unix sockets and prepares a
claim's GPU results with no CDI devices (the fake GPUs have nothing to inject); unprepare succeeds.
Nothing else prepares these GPUs; the checks only see that our driver ignores their results.
``GpuStandIn`` is both on one node of a stack.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError
from sriov_dra.kubeletplugin.gen import dra_v1_pb2, pluginregistration_v1_pb2
from sriov_dra.kubeletplugin.server import unary_service
from sriov_dra.model import ATTR_PCIE_ROOT
from testbed.sriov_topology import GpuRecord

if TYPE_CHECKING:
    from testbed.cluster import Cluster
    from testbed.fake_kubelet import KubeletDirs
    from testbed.fakenode import FakeNode

DRA_SERVICE = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
GPU_DRIVER = "gpu.nvidia.com"


def gpu_slice(node_name: str, gpus: Sequence[GpuRecord]) -> dict[str, Any]:
    """The NVIDIA driver's publication: one ResourceSlice of full GPUs, each with the PCIe root
    the scheduler matches the spec 14.2 pairs on (our driver publishes it for its VFs)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"generateName": f"{node_name}-{GPU_DRIVER}-"},
        "spec": {
            "driver": GPU_DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": gpu.name,
                    "attributes": {
                        "type": {"string": "gpu"},
                        ATTR_PCIE_ROOT: {"string": gpu.pcie_root},
                        "pciBusID": {"string": gpu.pci},
                    },
                }
                for gpu in gpus
            ],
        },
    }


class GpuPlugin:
    """``GpuPlugin(api, registry_dir, plugins_dir)`` serves at once; ``stop()`` removes the sockets."""

    def __init__(self, api: client.ApiClient, registry_dir: Path, plugins_dir: Path) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.dra_socket = plugins_dir / GPU_DRIVER / "dra.sock"
        self.reg_socket = registry_dir / f"{GPU_DRIVER}-reg.sock"
        self.registered = threading.Event()
        self.prepared: dict[str, int] = {}  # claim UID -> prepare calls, for tests
        self._servers: list[grpc.Server] = []
        pb = dra_v1_pb2
        self._serve(
            self.dra_socket,
            unary_service(
                DRA_SERVICE,
                {
                    "NodePrepareResources": (
                        self._prepare,
                        pb.NodePrepareResourcesRequest,
                        pb.NodePrepareResourcesResponse,
                    ),
                    "NodeUnprepareResources": (
                        self._unprepare,
                        pb.NodeUnprepareResourcesRequest,
                        pb.NodeUnprepareResourcesResponse,
                    ),
                },
            ),
        )
        reg = pluginregistration_v1_pb2
        self._serve(
            self.reg_socket,
            unary_service(
                "pluginregistration.Registration",
                {
                    "GetInfo": (self._info, reg.InfoRequest, reg.PluginInfo),
                    "NotifyRegistrationStatus": (
                        self._notify,
                        reg.RegistrationStatus,
                        reg.RegistrationStatusResponse,
                    ),
                },
            ),
        )

    def _serve(self, socket: Path, handler: grpc.GenericRpcHandler) -> None:
        socket.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            socket.unlink()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port(f"unix://{socket}")
        server.start()
        self._servers.append(server)

    def _info(self, _request: Any, _context: grpc.ServicerContext) -> Any:
        return pluginregistration_v1_pb2.PluginInfo(
            type="DRAPlugin",
            name=GPU_DRIVER,
            endpoint=str(self.dra_socket),
            supported_versions=["v1.DRAPlugin"],
        )

    def _notify(self, request: Any, _context: grpc.ServicerContext) -> Any:
        if request.plugin_registered:
            self.registered.set()
        return pluginregistration_v1_pb2.RegistrationStatusResponse()

    def _prepare(self, request: Any, _context: grpc.ServicerContext) -> Any:
        response = dra_v1_pb2.NodePrepareResourcesResponse()
        for ref in request.claims:
            entry = response.claims[ref.uid]
            self.prepared[ref.uid] = self.prepared.get(ref.uid, 0) + 1
            try:
                claim: dict[str, Any] = self.objects.get_namespaced_custom_object(  # type: ignore[assignment]
                    "resource.k8s.io", "v1", ref.namespace, "resourceclaims", ref.name
                )
            except ApiException as exc:
                entry.error = f"claim {ref.namespace}/{ref.name}: {exc.status} {exc.reason}"
                continue
            results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results"
            ) or []
            entry.devices.extend(
                dra_v1_pb2.Device(
                    request_names=[r["request"].split("/")[0]], pool_name=r["pool"], device_name=r["device"]
                )
                for r in results
                if r["driver"] == GPU_DRIVER
            )
        return response

    def _unprepare(self, request: Any, _context: grpc.ServicerContext) -> Any:
        response = dra_v1_pb2.NodeUnprepareResourcesResponse()
        for ref in request.claims:
            response.claims[ref.uid].error = ""
        return response

    def stop(self) -> None:
        # The registration socket first: the kubelet de-registers the plugin when it disappears.
        for server in reversed(self._servers):
            server.stop(None).wait()
        for socket in (self.reg_socket, self.dra_socket):
            with contextlib.suppress(FileNotFoundError):
                socket.unlink()


class GpuStandIn:
    """The GPU stand-in on one node of a stack: its ResourceSlice of the fake node's GPUs, and, for
    the real kubelet, its plugin."""

    def __init__(
        self, cluster: Cluster, *, node_name: str, dirs: KubeletDirs, node: Callable[[], FakeNode]
    ) -> None:
        self.cluster, self.node_name, self.dirs, self.node = cluster, node_name, dirs, node
        self.plugin: GpuPlugin | None = None

    def start_plugin(self, kubelet_errors: Callable[[], str]) -> None:
        # The real kubelet prepares every driver of a claim: the GPU driver needs a plugin too.
        self.plugin = GpuPlugin(self.cluster.api, self.dirs.registry, self.dirs.plugins)
        if not self.plugin.registered.wait(30):
            raise ReasonedError(
                "GpuPluginNotRegistered",
                f"the kubelet did not register the {GPU_DRIVER} stand-in plugin: {kubelet_errors()}",
            )

    def stop(self) -> None:
        if self.plugin is not None:
            self.plugin.stop()

    def slices(self) -> list[dict[str, Any]]:
        return self.cluster.slices(self.node_name, GPU_DRIVER)

    def attributes(self) -> dict[str, dict[str, Any]]:
        """Published GPU name -> its attributes."""
        return {d["name"]: d["attributes"] for s in self.slices() for d in s["spec"].get("devices") or []}

    def publish(self) -> None:
        """The NVIDIA driver's publication for the fake node's GPUs (a fresh one)."""
        self.withdraw()
        self.cluster.objects.create_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", gpu_slice(self.node_name, self.node().gpus)
        )

    def withdraw(self) -> None:
        self.cluster.delete_slices(self.slices())
