"""A stand-in for the NVIDIA DRA driver's publication: one ResourceSlice of full GPUs.

The scheduler can only satisfy the spec 14.2 pairs (``matchAttribute: resource.kubernetes.io/pcieRoot``)
when GPUs are published with the same PCIe-root attribute the SR-IOV driver publishes for its VFs.
Nothing prepares these GPUs; the tests only check that their results are ignored by our driver.

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

GPU_DRIVER = "gpu.nvidia.com"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


def gpu_slice(node_name: str, gpus: Sequence[GpuRecord]) -> dict[str, Any]:
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
                        PCIE_ROOT: {"string": gpu.pcie_root},
                        "pciBusID": {"string": gpu.pci},
                    },
                }
                for gpu in gpus
            ],
        },
    }


@pytest.fixture
def gpu_slices(testbed: TestBed) -> Iterator[Callable[[str, Sequence[GpuRecord]], str]]:
    from kubernetes import client  # noqa: PLC0415 - keep the Kubernetes client out of unit runs

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
