"""The driver and the CNI daemon of one node as the kubelet runs them from the installation
(testbed/installation.py): Pods of the DaemonSets, watched through the API and the node's CRI.

They answer the stack's questions the way ``testbed.driver.Driver`` and ``NodeCni``'s daemon do
for host processes: registered yet, what was logged, how many ADDs were served; a crash is a
SIGKILL of the container's process, which the kubelet restarts; a restart with other settings is
an edit of the DaemonSet, which rolls its Pods.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sriov_contract.errors import ReasonedError
from testbed.deployment import CNI_NAMESPACE, DRIVER_NAMESPACE
from testbed.driver import REGISTERED, DriverState
from testbed.installation import CNI_DAEMONSET, DRIVER_DAEMONSET, Installation
from testbed.nodecni import serving
from testbed.waiting import WaitTimeout, wait_for

if TYPE_CHECKING:
    from testbed.bed import TestBed
    from testbed.cluster import Cluster
    from testbed.fake_kubelet import KubeletDirs
    from testbed.realnode import RealNode

DRIVER_CONTAINER = "driver"
DAEMON_CONTAINER = "daemon"
REGISTER_TIMEOUT = 120.0


class NodePod:
    """One DaemonSet's Pod on one node."""

    def __init__(
        self, installation: Installation, namespace: str, daemonset: str, container: str,
        node_name: str, runtime: Callable[[], RealNode],
    ) -> None:  # fmt: skip
        self.installation, self.namespace, self.daemonset = installation, namespace, daemonset
        self.container, self.node_name, self.runtime = container, node_name, runtime

    def pod(self) -> dict[str, Any] | None:
        return self.installation.pod_on(self.namespace, self.daemonset, self.node_name)

    def uid(self) -> str | None:
        pod = self.pod()
        return str(pod["metadata"]["uid"]) if pod is not None else None

    def log(self, *, restarts: bool = True) -> str:
        uid = self.uid()
        return self.runtime().container_log(uid, self.container, restarts=restarts) if uid else ""

    def kill(self) -> None:
        """SIGKILL the container's process (a crash); the kubelet starts it again."""
        self.signal(signal.SIGKILL)

    def signal(self, sig: signal.Signals) -> None:
        uid = self.uid()
        if uid is None:
            raise ReasonedError("NoPod", f"no {self.daemonset} Pod runs on {self.node_name}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.runtime().container_pid(uid, self.container), sig)

    def restarts(self) -> int:
        """How often the kubelet restarted the container in the current Pod."""
        pod = self.pod() or {}
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        return sum(int(s.get("restartCount") or 0) for s in statuses if s["name"] == self.container)

    def describe(self) -> str:
        return self.installation.describe(self.namespace, self.daemonset, self.node_name)

    def wait(self, condition: Callable[[], bool], what: str, reason: str) -> None:
        """Until ``condition`` holds; past the time-out, ``reason`` with the Pod's state and log."""
        try:
            wait_for(condition, REGISTER_TIMEOUT, what=what, interval=0.3)
        except WaitTimeout as exc:
            raise ReasonedError(reason, f"{exc.message}: {self.describe()}\n{self.log()[-3000:]}") from None


class InstalledDriver(DriverState):
    """sriov-dra-driver as its DaemonSet's Pod on the node."""

    token = None  # its ServiceAccount token is the kubelet's business, projected into the Pod

    def __init__(
        self,
        bed: TestBed,
        cluster: Cluster,
        *,
        node_name: str,
        dirs: KubeletDirs,
        installation: Callable[[], Installation],
        runtime: Callable[[], RealNode],
        say: Callable[[str], None],
    ) -> None:
        super().__init__(bed, cluster, node_name=node_name, dirs=dirs)
        self.installation, self.runtime, self.say = installation, runtime, say

    @property
    def pod(self) -> NodePod:
        return NodePod(
            self.installation(),
            DRIVER_NAMESPACE,
            DRIVER_DAEMONSET,
            DRIVER_CONTAINER,
            self.node_name,
            self.runtime,
        )

    def grant(self, anchor_image: str | None) -> None:
        """The installation applies the driver's RBAC; nothing to do per node."""

    def start(self) -> None:
        self.say(f"Waiting for the sriov-dra-driver Pod on {self.node_name} (kubelet, DaemonSet)...")
        self.wait_registered()

    def registered(self) -> bool:
        """The current container of the node's Pod has been registered by the kubelet."""
        return REGISTERED in self.pod.log(restarts=False)

    def registrations(self) -> int:
        return self.pod.log().count(REGISTERED)

    def wait_registered(self, before: int = 0) -> None:
        self.pod.wait(
            lambda: self.registered() and self.registrations() > before,
            f"the kubelet to register the sriov-dra-driver Pod on {self.node_name}",
            "DriverNotRegistered",
        )

    def restart(self, extra_env: Mapping[str, str] | None = None) -> None:
        """The DaemonSet's driver env set to the installation's plus ``extra_env`` (an admin's
        ``kubectl set env``), which rolls the Pod; then wait until the new one is registered."""
        installation = self.installation()
        before = self.pod.uid()
        if not installation.set_driver_env(dict(extra_env or {})):
            return
        wait_for(
            lambda: self.pod.uid() not in (None, before),
            REGISTER_TIMEOUT,
            what=f"the DaemonSet to replace the driver Pod on {self.node_name}",
            interval=0.3,
        )
        self.wait_registered()

    def kill(self) -> None:
        before = self.registrations()
        self.pod.kill()
        self.wait_registered(before)

    def output(self) -> str:
        return self.pod.log()[-4000:]

    def stop(self) -> None:
        """The installation removes the DaemonSet; nothing to do per node."""

    def revoke(self) -> None:
        """No token of the bed's own to revoke."""

    def logs(self) -> str:
        return f"--- driver Pod on {self.node_name} ---\n{self.output()}"


class InstalledDaemon:
    """cni-shim-daemon as its DaemonSet's Pod on the node."""

    def __init__(
        self, installation: Callable[[], Installation], node_name: str, runtime: Callable[[], RealNode],
        socket_dir: Path,
    ) -> None:  # fmt: skip
        self.pod = NodePod(installation(), CNI_NAMESPACE, CNI_DAEMONSET, DAEMON_CONTAINER, node_name, runtime)
        self.socket_dir = socket_dir

    def wait_serving(self) -> None:
        self.pod.wait(
            lambda: serving(self.socket_dir),
            f"cni-shim-daemon to listen in {self.socket_dir}",
            "DaemonNotServing",
        )
