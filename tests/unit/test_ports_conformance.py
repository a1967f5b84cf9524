"""Every adapter and every test double provides what its port declares.

Python's counterpart of Go's `var _ Interface = (*Impl)(nil)`: a port method renamed on one side
only fails here, before any flow test runs into an AttributeError.
"""

from __future__ import annotations

from typing import Any

import pytest

from cni_shim import ports as cni
from cni_shim.kube.thin_client import KubeClient
from cni_shim.kube.views import CachedView, LiveView
from cni_shim.node.cache import FileCacheStore
from cni_shim.node.chroot import ChrootExecutor
from cni_shim.node.conffiles import NodeConfFiles
from cni_shim.node.execution import ProcessExecutor
from cni_shim.node.logs import Logger
from cni_shim.node.routes import IpRoutes
from sriov_dra import ports as drv
from sriov_dra.kube import resources as kube
from sriov_dra.state.cdi import CdiDir
from sriov_dra.state.checkpoint import FileStorage
from sriov_dra.sysfs.vfdriver import SysfsVfDriver
from tests.fakes import cni_ports, driver_env, kube_api


def members(protocol: type) -> set[str]:
    own: set[str] = set()
    for base in protocol.__mro__:
        if base.__module__ in {protocol.__module__}:
            own |= {n for n in vars(base) if not n.startswith("_")} | set(
                getattr(base, "__annotations__", {})
            )
    return own


CONFORMS: list[tuple[type, Any]] = [
    # driver adapters
    (drv.ClaimReader, kube.KubeClaims),
    (drv.ClaimStatusApi, kube.KubeClaims),
    (drv.PodClient, kube.KubePods),
    (drv.NadClient, kube.KubeNads),
    (drv.ShadowLister, kube.KubeShadowLister),
    (drv.NamespaceShadowLister, kube.KubeShadowLister),
    (drv.PodLister, kube.KubePods),
    (drv.ClaimLister, kube.KubeClaims),
    (drv.EventSink, kube.KubeEvents),
    (drv.SliceApi, kube.KubeSlices),
    (drv.PolicySource, kube.KubePolicySource),
    (drv.VfDriver, SysfsVfDriver),
    (drv.CdiSpecs, CdiDir),
    (drv.CheckpointStorage, FileStorage),
    # driver doubles
    (drv.PodClient, kube_api.FakeApi),
    (drv.NadClient, kube_api.FakeApi),
    (drv.ShadowLister, kube_api.FakeApi),
    (drv.NamespaceShadowLister, kube_api.FakeApi),
    (drv.PodLister, kube_api.FakeApi),
    (drv.ClaimLister, kube_api.FakeApi),
    (drv.ClaimReader, driver_env.Claims),
    # CNI adapters
    (cni.Executor, ProcessExecutor),
    (cni.Executor, ChrootExecutor),
    (cni.CacheStore, FileCacheStore),
    (cni.KubeApi, KubeClient),
    (cni.KubeApi, LiveView),
    (cni.KubeApi, CachedView),
    (cni.Routes, IpRoutes),
    (cni.ConfFiles, NodeConfFiles),
    (cni.Log, Logger),
    # CNI doubles
    (cni.Executor, cni_ports.FakeExecutor),
    (cni.KubeApi, cni_ports.FakeKube),
    (cni.Clock, cni_ports.FakeClock),
    (cni.Log, cni_ports.ListLog),
    (cni.Routes, cni_ports.FakeRoutes),
]


@pytest.mark.parametrize(("port", "impl"), CONFORMS, ids=lambda x: getattr(x, "__qualname__", str(x)))
def test_implementation_provides_every_member_of_its_port(port: type, impl: type) -> None:
    missing = {
        name
        for name in members(port)
        if not hasattr(impl, name)
        and name not in getattr(impl, "__dataclass_fields__", {})
        and name not in getattr(impl, "__slots__", ())
    }
    # Instance attributes (e.g. pod_reads_live) are set in __init__: look for them there.
    init = getattr(impl, "__init__", None)
    code = getattr(init, "__code__", None)
    assigned = set(code.co_names) if code is not None else set()
    assert missing - assigned == set(), (
        f"{impl.__qualname__} lacks {sorted(missing - assigned)} of {port.__qualname__}"
    )
