"""The bed's device plugin (testbed/device_plugin.py) against a stand-in kubelet over real unix
sockets: it registers its resource, lists its VFs on their NUMA nodes, answers Allocate like the
SR-IOV device plugin and leaves device-info files only while it runs."""

from __future__ import annotations

import json
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from testbed.device_plugin import LEGACY_RESOURCE, LegacyVfPlugin, device_info_path, env_name
from testbed.gen import deviceplugin_v1beta1_pb2 as pb
from testbed.sriov_topology import VfRecord


def _vf(pci: str, numa: int) -> VfRecord:
    return VfRecord(
        pci=pci,
        pcie_root="pci0000:00",
        numa=numa,
        vendor="15b3",
        device="101e",
        driver="mlx5_core",
        netdev="x",
        mac="02:00:00:00:00:01",
        rail="rail-a",
        subnet="10.0.0.0/24",
        pf="p0",
        pf_pci="0000:03:00.0",
        vf_index=0,
    )


@pytest.fixture
def kubelet(tmp_path: Path):
    """A stand-in for the kubelet's Registration service in a device-plugins directory."""
    registered: list[Any] = []
    got = threading.Event()

    def register(request: Any, _context: Any) -> Any:
        registered.append(request)
        got.set()
        return pb.Empty()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "v1beta1.Registration",
                {
                    "Register": grpc.unary_unary_rpc_method_handler(
                        register,
                        request_deserializer=pb.RegisterRequest.FromString,
                        response_serializer=pb.Empty.SerializeToString,
                    )
                },
            ),
        )
    )
    server.add_insecure_port(f"unix://{tmp_path / 'kubelet.sock'}")
    server.start()
    yield registered
    server.stop(None)


def test_registers_lists_allocates_and_cleans_up(tmp_path: Path, kubelet: list[Any]) -> None:
    devinfo = tmp_path / "dp"
    plugin = LegacyVfPlugin(tmp_path, [_vf("0000:03:00.4", 0), _vf("0000:03:00.5", 1)], devinfo_dir=devinfo)
    plugin.start()
    try:
        (request,) = kubelet
        assert (request.version, request.endpoint, request.resource_name) == (
            "v1beta1",
            "legacy-vfs.sock",
            LEGACY_RESOURCE,
        )
        assert json.loads(device_info_path(devinfo, LEGACY_RESOURCE, "0000:03:00.5").read_text()) == {
            "type": "pci",
            "version": "1.1.0",
            "pci": {"pci-address": "0000:03:00.5"},
        }
        with grpc.insecure_channel(f"unix://{plugin.socket}") as channel:
            watch = channel.unary_stream(
                "/v1beta1.DevicePlugin/ListAndWatch",
                request_serializer=pb.Empty.SerializeToString,
                response_deserializer=pb.ListAndWatchResponse.FromString,
            )(pb.Empty(), timeout=5)
            first = next(watch)
            assert [(d.ID, d.health, d.topology.nodes[0].ID) for d in first.devices] == [
                ("0000:03:00.4", "Healthy", 0),
                ("0000:03:00.5", "Healthy", 1),
            ]
            watch.cancel()
            answer = channel.unary_unary(
                "/v1beta1.DevicePlugin/Allocate",
                request_serializer=pb.AllocateRequest.SerializeToString,
                response_deserializer=pb.AllocateResponse.FromString,
            )(
                pb.AllocateRequest(
                    container_requests=[pb.ContainerAllocateRequest(devices_ids=["0000:03:00.5"])]
                )
            )
        assert dict(answer.container_responses[0].envs) == {
            "PCIDEVICE_OPENSHIFT_IO_LEGACY_VFS": "0000:03:00.5"
        }
        assert plugin.allocated == [["0000:03:00.5"]]
    finally:
        plugin.stop()
    assert not plugin.socket.exists()
    assert list(devinfo.iterdir()) == []


def test_the_environment_variable_is_the_sriov_plugins() -> None:
    assert env_name("intel.com/sriov_net-A") == "PCIDEVICE_INTEL_COM_SRIOV_NET_A"
