"""A thin invocation's adapters: processes, files under cniDir, the live API server, wall clock.

The composition root of the `cni-shim` executable (the daemon's, cni_shim.app.thick, starts
from these and swaps in its own executor and API views). Only what one invocation needs is
imported: this module is on every thin ADD and DEL.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from cni_shim.core.netconf import NetConf
from cni_shim.handler import Services
from cni_shim.kube.eventwriter import ThinEvents
from cni_shim.node.cache import FileCacheStore
from cni_shim.node.conffiles import NodeConfFiles
from cni_shim.node.devinfofiles import NodeDeviceInfoFiles
from cni_shim.node.execution import ProcessExecutor
from cni_shim.node.logs import Logger
from cni_shim.node.routes import IpRoutes
from cni_shim.node.versioncache import FileVersionCache

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.ports import KubeApi, NodeDevices, PodResources


# Under cniDir, beside the delegate plans (files) and results (a directory).
VERSIONS_DIR = "versions"


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def kube_for(env: Mapping[str, str]) -> Callable[[NetConf], KubeApi | None]:
    """kubeconfig key first, then in-cluster settings; no client at all means Multus's no-Kubernetes mode."""

    def build(conf: NetConf) -> KubeApi | None:
        from cni_shim.kube import kubeconfig, thin_client  # noqa: PLC0415 - http/ssl only when the API is used

        if conf.kubeconfig:
            return thin_client.KubeClient(kubeconfig.load(conf.kubeconfig))
        connection = kubeconfig.in_cluster(env)
        return thin_client.KubeClient(connection) if connection is not None else None

    return build


def node_devices(conf: NetConf) -> NodeDevices:
    from cni_shim.node.devices import SysfsDevices  # noqa: PLC0415 - only when a network names a device

    return SysfsDevices(conf.sysfs_root, conf.device_checkpoint_file)


def pod_resources(conf: NetConf) -> PodResources:
    from cni_shim.node.podresources import KubeletPodResources  # noqa: PLC0415 - only for a resourceName NAD

    return KubeletPodResources(conf.pod_resources_socket, conf.device_checkpoint_file)


def services(env: Mapping[str, str]) -> Services:
    clients: dict[str, KubeApi | None] = {}
    build = kube_for(env)

    def cached_kube(conf: NetConf) -> KubeApi | None:
        # One connection per invocation: ADD reads the Pod, NADs and writes status over it.
        if conf.kubeconfig not in clients:
            clients[conf.kubeconfig] = build(conf)
        return clients[conf.kubeconfig]

    executor = ProcessExecutor()
    return Services(
        executor=executor,
        store_for=FileCacheStore,
        kube_for=cached_kube,
        log_for=lambda conf: Logger(conf.log_level, conf.log_to_stderr, conf.log_file),
        clock=SystemClock(),
        delegate_env=dict(env),
        routes=IpRoutes(),
        conf_files=NodeConfFiles(),
        # The invocation's one API client, once the ADD has made it (none: no Events).
        events=ThinEvents(lambda: next((c for c in clients.values() if c is not None), None)),
        versions_for=lambda cni_dir: FileVersionCache(executor, os.path.join(cni_dir, VERSIONS_DIR)),
        devices_for=node_devices,
        pod_resources_for=pod_resources,
        device_info_files=NodeDeviceInfoFiles(),
    )
