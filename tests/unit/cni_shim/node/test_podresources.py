"""The kubelet's allocations for the resourceName path: pod-resources List over a real unix-socket
gRPC server when the socket exists, the device-plugin checkpoint otherwise (Multus's order)."""

from __future__ import annotations

import json
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from cni_shim import reasons
from cni_shim.errors import CniError
from cni_shim.node.gen import podresources_v1_pb2 as pb
from cni_shim.node.podresources import KubeletPodResources


def _answer() -> pb.ListPodResourcesResponse:
    def pod(name: str, namespace: str, devices: list[tuple[str, list[str]]]) -> pb.PodResources:
        container = pb.ContainerResources(
            name="c", devices=[pb.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in devices]
        )
        return pb.PodResources(name=name, namespace=namespace, containers=[container])

    return pb.ListPodResourcesResponse(
        pod_resources=[
            pod("pod1", "other", [("r", ["x"])]),
            pod("pod1", "ns1", [("openshift.io/legacy_vfs", ["0000:03:00.2", "0000:03:00.1"])]),
        ]
    )


@pytest.fixture
def kubelet(tmp_path: Path):
    sock = tmp_path / "kubelet.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    handler = grpc.method_handlers_generic_handler(
        "v1.PodResourcesLister",
        {
            "List": grpc.unary_unary_rpc_method_handler(
                lambda req, ctx: _answer(),
                request_deserializer=pb.ListPodResourcesRequest.FromString,
                response_serializer=pb.ListPodResourcesResponse.SerializeToString,
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix://{sock}")
    server.start()
    yield sock
    server.stop(None)


def test_the_pod_resources_api_answers_when_its_socket_exists(kubelet, tmp_path):
    found = KubeletPodResources(str(kubelet), str(tmp_path / "no-checkpoint")).allocations("ns1", "pod1", "u")
    assert found == [("openshift.io/legacy_vfs", ["0000:03:00.2", "0000:03:00.1"])]


def test_a_socket_nobody_serves_is_a_retryable_failure(tmp_path):
    sock = tmp_path / "dead.sock"
    sock.touch()
    with pytest.raises(CniError) as err:
        KubeletPodResources(str(sock), str(tmp_path / "cp")).allocations("ns1", "pod1", "u")
    assert err.value.reason == reasons.POD_RESOURCES_UNAVAILABLE
    assert err.value.code == 11


def test_without_the_socket_the_checkpoint_is_read_by_pod_uid(tmp_path):
    checkpoint = tmp_path / "kubelet_internal_checkpoint"
    checkpoint.write_text(
        json.dumps(
            {
                "Data": {
                    "PodDeviceEntries": [
                        {
                            "PodUID": "u",
                            "ContainerName": "c",
                            "ResourceName": "r",
                            "DeviceIDs": {"0": ["b", "a"]},
                        },
                        {
                            "PodUID": "other",
                            "ContainerName": "c",
                            "ResourceName": "r",
                            "DeviceIDs": {"0": ["z"]},
                        },
                    ]
                },
                "Checksum": 1,
            }
        )
    )
    found = KubeletPodResources(str(tmp_path / "none.sock"), str(checkpoint)).allocations("ns1", "pod1", "u")
    assert found == [("r", ["b", "a"])]


@pytest.mark.parametrize(
    ("content", "words"), [(None, "error reading file"), ("{", "error unmarshalling raw bytes")]
)
def test_an_unreadable_checkpoint_fails_in_multus_words(tmp_path, content, words):
    checkpoint = tmp_path / "cp"
    if content is not None:
        checkpoint.write_text(content)
    with pytest.raises(CniError) as err:
        KubeletPodResources(str(tmp_path / "none.sock"), str(checkpoint)).allocations("ns1", "pod1", "u")
    assert err.value.reason == reasons.DEVICE_CHECKPOINT_UNREADABLE
    assert err.value.message.startswith(f"getPodEntries: {words}")


def test_a_missing_checkpoint_is_worded_as_multus_words_it(tmp_path):
    checkpoint = tmp_path / "kubelet_internal_checkpoint"
    with pytest.raises(CniError) as err:
        KubeletPodResources(str(tmp_path / "none.sock"), str(checkpoint)).allocations("ns1", "pod1", "u")
    assert err.value.message == (
        f"getPodEntries: error reading file {checkpoint}\nopen {checkpoint}: no such file or directory\n"
    )
