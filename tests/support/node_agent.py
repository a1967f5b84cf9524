"""Fixtures for suites that run the real `sriov-dra-driver` on the fake node (see testbed/node_agent.py
and testbed/managed_driver.py for what they hand out).

- ``driver_crds`` (session): our CRDs, established, readable by the bed's ``driver`` identity.
- ``agent``: an unstarted plain-mode ``Agent`` in the test's namespace; its slices are removed after.
- ``shipped_rbac_identity`` (session): the driver's ServiceAccount identity under deploy/base/driver-rbac.yaml.
- ``node_bound_kubeconfig`` (session): that ServiceAccount's token bound to a Pod on the bed's node,
  as a DaemonSet Pod's projected token is (what `associated-node:` verbs, status.devices, need).
- ``classes`` (session): the managed suites' DeviceClasses (``Classes``).
- ``policies``: per-test policy objects in the driver namespace (``Policies``), removed after.
- ``managed_agent``: an unstarted managed-mode ``ManagedAgent`` under the shipped RBAC.
- ``released_workloads``: after the test, forces the test namespace's Pods and claims out (no kubelet
  ends them) so their VFs return to the scheduler; a module opts in with
  ``pytest.mark.usefixtures("released_workloads")``.
- ``second_namespace``: another namespace, released and deleted after.

Heavy imports (the Kubernetes client) happen inside the fixtures so that unit-only runs stay fast.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from testbed.bed import TestBed
    from testbed.fake_kubelet import FakeKubelet, KubeletDirs
    from testbed.fakenode import FakeNode
    from testbed.managed_driver import Classes, ManagedAgent, Policies
    from testbed.node_agent import Agent


@pytest.fixture(scope="session")
def driver_crds(testbed: TestBed) -> None:
    from testbed.node_agent import install_driver_crds  # noqa: PLC0415 - see module docstring

    install_driver_crds(testbed)


@pytest.fixture
def agent(
    testbed: TestBed, driver_crds: None, k8s_namespace: str, fake_node: FakeNode, kubelet_dirs: KubeletDirs
) -> Iterator[Agent]:
    from testbed.claims import custom_objects  # noqa: PLC0415 - see module docstring
    from testbed.node_agent import Agent, node_slices  # noqa: PLC0415 - see module docstring

    a = Agent(testbed, k8s_namespace, fake_node.sysfs_root, kubelet_dirs)
    yield a
    a.stop()
    # Slices outlive the process (the Node owns them); the next test starts from none.
    for s in node_slices(testbed):
        custom_objects(testbed).delete_cluster_custom_object(
            "resource.k8s.io", "v1", "resourceslices", s["metadata"]["name"]
        )
    for f in sorted(kubelet_dirs.cdi.glob("*")):
        print("CDI left:", f.name)
    print(a.output()[-4000:])


@pytest.fixture(scope="session")
def shipped_rbac_identity(testbed: TestBed) -> str:
    from testbed.managed_driver import issue_shipped_rbac_identity  # noqa: PLC0415 - see module docstring

    return issue_shipped_rbac_identity(testbed)


@pytest.fixture(scope="session")
def node_bound_kubeconfig(
    testbed: TestBed, shipped_rbac_identity: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    from testbed.bound_token import node_bound_kubeconfig as bound  # noqa: PLC0415 - see module docstring
    from testbed.deployment import DRIVER_NAMESPACE, DRIVER_SA  # noqa: PLC0415 - see module docstring

    token = bound(
        testbed, DRIVER_NAMESPACE, DRIVER_SA, tmp_path_factory.mktemp("bound-token") / "driver.json"
    )
    yield token.kubeconfig
    token.revoke(testbed)


@pytest.fixture(scope="session")
def classes(testbed: TestBed) -> Iterator[Classes]:
    from kubernetes import client  # noqa: PLC0415 - see module docstring

    from testbed.claims import custom_objects  # noqa: PLC0415 - see module docstring
    from testbed.managed_driver import Classes  # noqa: PLC0415 - see module docstring

    core = client.CoreV1Api(testbed.api_client)
    source_ns = f"managed-sources-{secrets.token_hex(3)}"
    core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": source_ns}}))
    made = Classes(testbed, source_ns)
    yield made
    for plural, name in made.made:
        custom_objects(testbed).delete_cluster_custom_object("resource.k8s.io", "v1", plural, name)
    core.delete_namespace(source_ns)


@pytest.fixture
def released_workloads(testbed: TestBed, k8s_namespace: str) -> Iterator[None]:
    from testbed.managed_driver import release_workloads  # noqa: PLC0415 - see module docstring

    yield
    release_workloads(testbed, k8s_namespace)


@pytest.fixture
def second_namespace(testbed: TestBed) -> Iterator[str]:
    from kubernetes import client  # noqa: PLC0415 - see module docstring

    from testbed.managed_driver import release_workloads  # noqa: PLC0415 - see module docstring

    name = testbed.create_namespace(f"managed-b-{secrets.token_hex(3)}")
    yield name
    release_workloads(testbed, name)
    client.CoreV1Api(testbed.api_client).delete_namespace(name)


@pytest.fixture
def policies(testbed: TestBed) -> Iterator[Policies]:
    from testbed.managed_driver import Policies  # noqa: PLC0415 - see module docstring

    p = Policies(testbed)
    yield p
    p.cleanup()


@pytest.fixture
def managed_agent(
    testbed: TestBed,
    shipped_rbac_identity: str,
    fake_node: FakeNode,
    kubelet_dirs: KubeletDirs,
    fake_kubelet_factory: Callable[..., FakeKubelet],
) -> Iterator[ManagedAgent]:
    from testbed.managed_driver import ManagedAgent  # noqa: PLC0415 - see module docstring

    a = ManagedAgent(testbed, fake_node, kubelet_dirs, fake_kubelet_factory)
    yield a
    a.stop()
    print(a.output()[-6000:])
