"""The GPU stand-in's publication (testbed/gpu_plugin.py: one ResourceSlice of full GPUs) for
suites without the end-to-end stack.

Fixture: ``gpu_slices`` -> ``publish(node_name, gpus) -> slice name``; every slice is deleted after
the test. ``gpus`` are the fake node's ``GpuRecord``s (name, pcie_root).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from testbed.bed import TestBed
    from testbed.sriov_topology import GpuRecord


@pytest.fixture
def gpu_slices(testbed: TestBed) -> Iterator[Callable[[str, Sequence[GpuRecord]], str]]:
    from kubernetes import client  # noqa: PLC0415 - keep the Kubernetes client out of unit runs

    from testbed.gpu_plugin import gpu_slice  # noqa: PLC0415 - it imports the Kubernetes client

    api = client.CustomObjectsApi(testbed.api_client)
    made: list[str] = []

    def publish(node_name: str, gpus: Sequence[GpuRecord]) -> str:
        obj: Any = api.create_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", gpu_slice(node_name, gpus)
        )
        name = str(obj["metadata"]["name"])
        made.append(name)
        return name

    yield publish
    for name in made:
        api.delete_cluster_custom_object("resource.k8s.io", "v1", "resourceslices", name)
