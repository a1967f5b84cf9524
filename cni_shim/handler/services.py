"""What a mode plugs into the verbs: the adapters behind cni_shim.ports, built per request."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from cni_shim.core.netconf import NetConf
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.ports import CacheStore, Clock, ConfFiles, EventSink, Executor, KubeApi, Log, Routes


def stat_netns(path: str) -> str | None:
    """Why CNI_NETNS cannot be the Pod's netns (Go's ns.GetNS wording), None when it exists: one stat."""
    try:
        os.stat(path)
    except OSError as exc:
        return f'failed to Statfs "{path}": {(exc.strerror or str(exc)).lower()}'
    return None


class Services(TypedTuple):
    """The adapters a mode plugs in; factories take the decoded config because it names dirs and kubeconfig."""

    executor: Executor
    store_for: Callable[[str], CacheStore]
    kube_for: Callable[[NetConf], KubeApi | None]
    log_for: Callable[[NetConf], Log]
    clock: Clock
    delegate_env: Mapping[str, str]
    routes: Routes
    # confDir and clusterNetwork files (the delegates those name).
    conf_files: ConfFiles
    # Checks the ADD's CNI_NETNS before the first delegate runs (Multus's validateIfName).
    netns_problem: Callable[[str], str | None] = stat_netns
    # Pod Events (AddedInterface, NoNetworkFound); None writes none whatever the config says.
    events: EventSink | None = None
    # What asks delegates for their VERSION, given cniDir (thin mode keeps the answers there);
    # None: `executor` itself (the daemon's remembers them in memory).
    versions_for: Callable[[str], Executor] | None = None
