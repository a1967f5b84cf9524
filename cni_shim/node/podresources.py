"""The kubelet's device-plugin allocations for the resourceName path (cni_shim.ports.PodResources).

Multus's resource client: the pod-resources API (v1 `List` over the kubelet's unix socket, with
Multus's 10 s call and 16 MiB answer limits) when that socket exists, otherwise the
device-plugin checkpoint file. gRPC and the generated stubs are imported only here and only when
the socket is there: an ADD that selects no resourceName NAD never loads this module at all.
The host-side thin shim is a stdlib-only bundle without gRPC: there the checkpoint answers, which
the kubelet keeps with the same device-plugin allocations (the daemon, thick mode, has gRPC).
"""

from __future__ import annotations

import os

from cni_shim import reasons
from cni_shim.core import kubeletcheckpoint, resourcenames
from cni_shim.errors import INTERNAL, TRY_AGAIN_LATER, CniError

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

_LIST = "/v1.PodResourcesLister/List"


class KubeletPodResources:
    def __init__(self, socket_path: str, checkpoint_file: str) -> None:
        self._socket = socket_path
        self._checkpoint = checkpoint_file

    def allocations(self, namespace: str, name: str, uid: str) -> list[tuple[str, list[str]]]:
        if os.path.exists(self._socket):
            try:
                import grpc  # noqa: PLC0415 - only a resourceName ADD on a node serving pod-resources pays for it

                from cni_shim.node.gen import podresources_v1_pb2  # noqa: PLC0415
            except ImportError:
                return self._checkpointed(uid)  # the stdlib-only host bundle (thin mode)
            return self._listed(grpc, podresources_v1_pb2, namespace, name)
        return self._checkpointed(uid)

    def _listed(self, grpc: Any, pb: Any, namespace: str, name: str) -> list[tuple[str, list[str]]]:

        options = [
            ("grpc.max_receive_message_length", resourcenames.MAX_MESSAGE_BYTES),
            ("grpc.enable_http_proxy", 0),
        ]
        # Multus dials without blocking (its 10 s dial bound never waits): a socket nobody serves
        # fails the List at once with Unavailable, which the runtime retries.
        with grpc.insecure_channel(f"unix://{self._socket}", options=options) as channel:
            call = channel.unary_unary(
                _LIST,
                request_serializer=pb.ListPodResourcesRequest.SerializeToString,
                response_deserializer=pb.ListPodResourcesResponse.FromString,
            )
            try:
                answer = call(pb.ListPodResourcesRequest(), timeout=resourcenames.LIST_TIMEOUT)
            except grpc.RpcError as exc:
                code = exc.code() if isinstance(exc, grpc.Call) else None
                desc = exc.details() if isinstance(exc, grpc.Call) else str(exc)
                raise CniError(
                    reasons.POD_RESOURCES_UNAVAILABLE,
                    "getKubeletClient: error getting pod resources from client: getPodResources: "
                    f"failed to list pod resources, rpc error: code = {_code_name(code)} desc = {desc}",
                    TRY_AGAIN_LATER,
                ) from exc
        return [
            (dev.resource_name, list(dev.device_ids))
            for pod in answer.pod_resources
            if pod.name == name and pod.namespace == namespace
            for container in pod.containers
            for dev in container.devices
        ]

    def _checkpointed(self, uid: str) -> list[tuple[str, list[str]]]:
        try:
            with open(self._checkpoint, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise CniError(
                reasons.DEVICE_CHECKPOINT_UNREADABLE,
                # Go's text: the path, then os's "open <path>: <errno text>", each line ended.
                f"getPodEntries: error reading file {self._checkpoint}\n"
                f"open {self._checkpoint}: {(exc.strerror or str(exc)).lower()}\n",
                INTERNAL,
            ) from exc
        try:
            return list(kubeletcheckpoint.resource_map(data, uid).items())
        except ValueError as exc:
            raise CniError(
                reasons.DEVICE_CHECKPOINT_UNREADABLE,
                f"getPodEntries: error unmarshalling raw bytes {exc}",
                INTERNAL,
            ) from exc


def _code_name(code: object) -> str:
    # grpc's StatusCode.UNAVAILABLE -> Go's codes.Unavailable.String() ("Unavailable").
    name = getattr(code, "name", "")
    return "".join(part.capitalize() for part in str(name).split("_")) if name else "Unknown"
