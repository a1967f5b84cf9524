"""sriov-dra-driver on one node of a stack, as its DaemonSet runs it: MULTUS mode with
auto-attach, under exactly the deployed RBAC with a token bound to a Pod on the node (only such a
token may write ResourceClaim status.devices), registered through the kubelet's plugin registry
over its real unix sockets. Also what it keeps: its ResourceSlices, its checkpoint, and what
``sriov-dra orphans`` finds against it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sriov_contract import keys
from sriov_contract.errors import ReasonedError
from sriov_dra.model import ATTR_PCI_BUS_ID
from testbed.bound_token import BoundToken, node_bound_kubeconfig
from testbed.deployment import BASE_DIR, DRIVER_NAMESPACE, DRIVER_SA
from testbed.processes import BIN, Process
from testbed.waiting import WaitTimeout, wait_for

if TYPE_CHECKING:
    from testbed.bed import TestBed
    from testbed.cluster import Cluster
    from testbed.fake_kubelet import KubeletDirs
    from testbed.fakenode import FakeNode

DRIVER = keys.DOMAIN
REGISTERED = "kubelet registered the plugin"  # the driver's log line (sriov_dra.app.wiring)


class DriverState:
    """What the driver of one node keeps, however it runs: its ResourceSlices, its checkpoint, and
    what ``sriov-dra orphans`` finds against it."""

    def __init__(self, bed: TestBed, cluster: Cluster, *, node_name: str, dirs: KubeletDirs) -> None:
        self.bed, self.cluster, self.node_name, self.dirs = bed, cluster, node_name, dirs

    @property
    def checkpoint(self) -> Path:
        return self.dirs.plugins / DRIVER / "checkpoint.json"

    def published(self) -> dict[str, dict[str, Any]]:
        """Its advertised devices on this node: device name -> attributes."""
        slices = self.cluster.slices(self.node_name, DRIVER)
        return {d["name"]: d.get("attributes") or {} for s in slices for d in s["spec"].get("devices") or []}

    def wait_advertised(self, pcis: frozenset[str]) -> None:
        def ready() -> bool:
            got = {str(a.get(ATTR_PCI_BUS_ID, {}).get("string")) for a in self.published().values()}
            return got == set(pcis)

        wait_for(ready, 60, what=f"the driver to advertise exactly {sorted(pcis)}")

    def checkpoint_claims(self) -> dict[str, Any]:
        if not self.checkpoint.exists():
            return {}
        claims: dict[str, Any] = json.loads(self.checkpoint.read_text())["data"]["claims"]
        return claims

    def orphan_scan(self) -> dict[str, Any]:
        """``sriov-dra orphans`` (a dry run) for this node against its checkpoint."""
        argv = [str(BIN / "sriov-dra"), "orphans", "--node", self.node_name, "-o", "json"]
        out = subprocess.run(
            [*argv, "--checkpoint", str(self.checkpoint), "--kubeconfig", str(self.bed.kubeconfig)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if out.returncode != 0:
            raise ReasonedError("OrphanScanFailed", f"sriov-dra orphans on {self.node_name}: {out.stderr}")
        doc: dict[str, Any] = json.loads(out.stdout)
        return doc


class Driver(DriverState):
    """``grant``, then ``start``; ``restart`` and ``kill`` as the lifecycle tests need; ``stop``.

    ``kubelet_log``: where the real kubelet runs, its log tail. Then a (re)start waits until the
    kubelet registered the driver, and a failure to do so quotes the kubelet."""

    def __init__(
        self,
        bed: TestBed,
        cluster: Cluster,
        *,
        node_name: str,
        run: Path,
        dirs: KubeletDirs,
        node: Callable[[], FakeNode],
        say: Callable[[str], None],
        kubelet_log: Callable[[], str] | None,
    ) -> None:
        super().__init__(bed, cluster, node_name=node_name, dirs=dirs)
        self.run = run
        self.node, self.say, self.kubelet_log = node, say, kubelet_log
        self.process: Process | None = None
        self.token: BoundToken | None = None

    def grant(self, anchor_image: str | None) -> None:
        """Exactly the deployed RBAC (deploy/base/driver-rbac.yaml). The driver runs as its
        ServiceAccount with a token bound to a Pod on the node, as in its DaemonSet; where the real
        kubelet runs, it runs that anchor Pod from ``anchor_image``."""
        self.bed.apply(yaml.safe_load_all((BASE_DIR / "driver-rbac.yaml").read_text()))
        self.token = node_bound_kubeconfig(
            self.bed,
            DRIVER_NAMESPACE,
            DRIVER_SA,
            self.run / "driver-kubeconfig.json",
            image=anchor_image,
            node_name=self.node_name,
        )

    def start(self, extra_env: Mapping[str, str] | None = None) -> None:
        self.say("Starting sriov-dra-driver (MULTUS mode, auto-attach)")
        assert self.token is not None, "the driver's RBAC and token come first"
        for d in (self.dirs.plugins, self.dirs.registry, self.dirs.cdi):
            d.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "NODE_NAME": self.node_name,
            "NAMESPACE": DRIVER_NAMESPACE,
            "CDI_ROOT": str(self.dirs.cdi),
            "KUBELET_REGISTRAR_DIRECTORY_PATH": str(self.dirs.registry),
            "KUBELET_PLUGINS_DIRECTORY_PATH": str(self.dirs.plugins),
            "SYSFS_ROOT": str(self.node().sysfs_root),
            "DEV_ROOT": str(self.node().dev_root),
            "KUBECONFIG": str(self.token.kubeconfig),
            "CONFIGURATION_MODE": "MULTUS",
            "MULTUS_AUTO_ATTACH": "true",
            **(extra_env or {}),
        }
        self.process = Process([str(BIN / "sriov-dra-driver")], env, self.run / "driver.log")

    def restart(self, extra_env: Mapping[str, str] | None = None) -> None:
        """Stop the driver (if it still runs) and start it again, e.g. with a crash point set
        (SRIOV_DRA_CRASH_AT); on the real kubelet, wait until the kubelet registered it again."""
        if self.process is not None:
            self.process.stop()
        before = self.registrations()
        self.start(extra_env)
        if self.kubelet_log is not None:
            self.wait_registered(before)

    def kill(self) -> None:
        """SIGKILL (a crash: no cleanup of its own), then start it again."""
        assert self.process is not None, f"no driver runs on {self.node_name}"
        self.process.proc.kill()
        self.process.proc.wait()
        self.restart()

    def registrations(self) -> int:
        # The driver's log is appended to across restarts: count, do not just look.
        return self.process.output(10_000_000).count(REGISTERED) if self.process is not None else 0

    def wait_registered(self, before: int = 0) -> None:
        process = self.process
        assert process is not None

        def registered() -> bool:
            if not process.alive():
                raise ReasonedError("DriverExited", f"sriov-dra-driver exited: {process.output()}")
            return self.registrations() > before

        try:
            wait_for(registered, 60, what="the kubelet to register sriov-dra-driver's plugin")
        except WaitTimeout as exc:
            kubelet = self.kubelet_log() if self.kubelet_log is not None else ""
            raise ReasonedError(
                "DriverNotRegistered", f"{exc.message}: {process.output()}\n--- kubelet ---\n{kubelet}"
            ) from None

    def output(self) -> str:
        return self.process.output() if self.process is not None else ""

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def revoke(self) -> None:
        if self.token is not None:
            self.token.revoke(self.bed)

    def logs(self) -> str:
        if self.process is None:
            return ""
        return f"--- driver ({self.process.log}) ---\n{self.process.output()}"
