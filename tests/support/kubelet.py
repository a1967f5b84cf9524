"""Fixtures around the fake kubelet (testbed/fake_kubelet.py).

``fake_kubelet_factory`` -> ``connect(registry_dir, timeout=10.0) -> FakeKubelet``;
``kubelet_dirs`` -> ``KubeletDirs(root, registry, plugins, cdi)`` under a short /tmp path (unix
socket paths are limited to 107 bytes, which pytest's tmp_path easily exceeds).
``health_check(port, service, timeout)``: the status kubelet's gRPC probe of the driver would get.
``watch_resources(socket)``: the resource-health stream kubelet reads from a DRA plugin.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from testbed.fake_kubelet import FakeKubelet, KubeletDirs, wait_for_socket


def health_check(port: int, service: str = "", timeout: float = 10.0, host: str = "localhost") -> int:
    from sriov_dra.kubeletplugin.gen import health_v1_pb2 as pb  # noqa: PLC0415 - after make gen

    with grpc.insecure_channel(f"{host}:{port}") as ch:
        call = ch.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=pb.HealthCheckRequest.SerializeToString,
            response_deserializer=pb.HealthCheckResponse.FromString,
        )
        return int(call(pb.HealthCheckRequest(service=service), timeout=timeout).status)


@contextlib.contextmanager
def watch_resources(socket: Path, timeout: float = 30.0) -> Iterator[Any]:
    """The DRA resource-health stream on ``socket``, opened as kubelet 1.36 opens it; iterate it
    for NodeWatchResourcesResponse messages. Leaving the block cancels it and closes the channel."""
    from sriov_dra.kubeletplugin.gen import dra_health_v1alpha1_pb2 as pb  # noqa: PLC0415 - after make gen

    with grpc.insecure_channel(f"unix://{socket}") as channel:
        stream = channel.unary_stream(
            "/v1alpha1.DRAResourceHealth/NodeWatchResources",
            request_serializer=pb.NodeWatchResourcesRequest.SerializeToString,
            response_deserializer=pb.NodeWatchResourcesResponse.FromString,
        )(pb.NodeWatchResourcesRequest(), timeout=timeout)
        try:
            yield stream
        finally:
            stream.cancel()


@pytest.fixture
def fake_kubelet_factory() -> Iterator[Any]:
    made: list[FakeKubelet] = []

    def connect(registry_dir: Path, timeout: float = 10.0) -> FakeKubelet:
        kubelet = FakeKubelet(wait_for_socket(registry_dir, "-reg.sock", timeout))
        made.append(kubelet)
        return kubelet

    yield connect
    # Each connection is closed even when closing another one failed.
    with contextlib.ExitStack() as close:
        for k in made:
            close.callback(k.close)


@pytest.fixture
def kubelet_dirs() -> Iterator[KubeletDirs]:
    root = Path(tempfile.mkdtemp(prefix="kl", dir="/tmp"))
    dirs = KubeletDirs(root, root / "plugins_registry", root / "plugins", root / "cdi")
    for d in (dirs.registry, dirs.plugins, dirs.cdi):
        d.mkdir()
    yield dirs
    shutil.rmtree(root, ignore_errors=True)
