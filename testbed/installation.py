"""The product installed the way a cluster installs it: our images, imported into each node's
containerd, and ``deploy/`` applied with kubectl, so the real kubelet runs the driver and the CNI
DaemonSets as Pods with their own ServiceAccount tokens and hostPath volumes.

What the bed changes, and only that, is what any site's overlay changes (``site_patches``):

- the simulated hardware: the driver's ``/sys`` volume comes from the fake SR-IOV node's tree, which
  each node's mount namespace (testbed/nodemounts.py) shows at ``BED_SYSFS``, and the daemon tells
  VFs apart in the same tree (``sysfsRoot``; the test sriov plugin finds its node's tree by itself,
  testbed/nodecni.py);
- auto-attach, the documented opt-in (``MULTUS_AUTO_ATTACH``), on, as the scenarios need it;
- metrics on any free port: the bed's two nodes share one network namespace, so a fixed port would
  be taken twice.

The bed has no kube-proxy. Pods find the API server the in-cluster way, through the ``kubernetes``
Service's ClusterIP, so the bed does the one thing kube-proxy would do for them: a DNAT rule in
the host's nat OUTPUT chain from that ClusterIP to the API server's loopback address
(``ServiceProxy``). Pods on host networking send from the host's own stack, hence OUTPUT.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError
from testbed.deployment import BASE_DIR, CNI_NAMESPACE, DRIVER_NAMESPACE, REPO_ROOT
from testbed.realnode import KUBELET_ROOT
from testbed.tools import ToolSet
from testbed.waiting import WaitTimeout, wait_for

BUILD_IMAGES = REPO_ROOT / "scripts" / "build_images.py"
# Where a node's mount namespace shows the bed's simulated hardware.
BED_ROOT = Path("/run/auto-sriov-bed")
BED_SYSFS = BED_ROOT / "sys"
DRIVER_DAEMONSET = "sriov-dra-driver"
CNI_DAEMONSET = "cni-shim"
DAEMON_CONFIG = "cni-shim-daemon-config"
READY_TIMEOUT = 180.0
FIELD_MANAGER = "auto-sriov-bed"
COMMENT = "auto-sriov bed: kubernetes Service"  # marks the bed's iptables rule


PROCESSES, DAEMONSETS = "processes", "daemonsets"  # how a stack runs the product on its nodes


def node_binds(
    *, kubelet_root: Path, cni_conf: Path, cni_bin: Path, socket_dir: Path, shim_cache: Path,
    cdi: Path, devinfo: Path, sysfs: Path,
) -> dict[Path, Path]:  # fmt: skip
    """Each hostPath of the shipped DaemonSets (and the paths their files name) -> the node's own
    directory behind it, for the node's mount namespace (testbed/nodemounts.py)."""
    return {
        KUBELET_ROOT: kubelet_root,
        Path("/etc/cni/net.d"): cni_conf,
        Path("/opt/cni/bin"): cni_bin,
        Path("/run/cni-shim"): socket_dir,
        Path("/var/lib/cni/multus"): shim_cache,
        Path("/run/cdi"): cdi,
        Path("/run/k8s.cni.cncf.io/devinfo"): devinfo,
        BED_SYSFS: sysfs,
    }


class InstallError(ReasonedError):
    """The product could not be built, installed or removed on the bed."""


def install_unavailable(tools: ToolSet, *, real_kubelet: bool, thick: bool) -> str | None:
    """Why the product cannot run as DaemonSets here, or None; builds the images (cached) to know."""
    if not real_kubelet:
        return "only the real kubelet runs DaemonSets"
    if not thick:
        return "the CNI DaemonSet runs thick; thin mode installs the host shim only"
    for command in ("iptables", "unshare", "nsenter"):
        if shutil.which(command) is None:
            return f"{command} is not installed"
    status = tools.status("kubectl")
    if not status.usable:
        return status.reason
    try:
        build_images()
    except InstallError as exc:
        return exc.message
    return None


@dataclass(frozen=True)
class ProductImage:
    name: str  # sriov-dra-driver, cni-shim
    reference: str  # as the manifests name it
    archive: Path  # OCI archive for ``ctr images import``


def build_images(tag: str | None = None, say: Callable[[str], None] = lambda s: None) -> list[ProductImage]:
    """Both product images of this tree (``make images``: cached by a hash of their inputs, so a
    second call costs a fraction of a second); ``tag`` instead of the manifests' own."""
    extra = ["--tag", tag] if tag else []
    build = subprocess.run(
        [sys.executable, str(BUILD_IMAGES), *extra], capture_output=True, text=True, check=False
    )
    for line in build.stderr.splitlines() + build.stdout.splitlines():
        say(f"  {line}")
    if build.returncode != 0:
        tail = (build.stderr or build.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InstallError("ImagesNotBuilt", f"{BUILD_IMAGES.name} failed: {tail[0]}")
    listed = subprocess.run(
        [sys.executable, str(BUILD_IMAGES), "--print-dir", *extra], capture_output=True, text=True, check=True
    )
    images = []
    for line in listed.stdout.split():
        name, _, directory = line.partition("=")
        path = Path(directory)
        images.append(ProductImage(name, (path / "reference").read_text().strip(), path / "image.oci.tar"))
    return images


def site_patches(docs: Iterable[Mapping[str, Any]], *, auto_attach: bool = True) -> list[dict[str, Any]]:
    """``docs`` (the rendered installation) with the bed's site settings (see the module's doc)."""
    out = []
    for doc in docs:
        obj = copy.deepcopy(dict(doc))
        kind, name = obj.get("kind"), (obj.get("metadata") or {}).get("name")
        if kind == "DaemonSet" and name == DRIVER_DAEMONSET:
            pod = obj["spec"]["template"]["spec"]
            _set_env(
                pod["containers"][0], {"MULTUS_AUTO_ATTACH": str(auto_attach).lower(), "METRICS_PORT": "0"}
            )
            for volume in pod["volumes"]:
                if volume["name"] == "sysfs":
                    volume["hostPath"]["path"] = str(BED_SYSFS)
        elif kind == "ConfigMap" and name == DAEMON_CONFIG:
            config = json.loads(obj["data"]["daemon-config.json"])
            config["metricsPort"] = 0
            config["sysfsRoot"] = f"/hostroot{BED_SYSFS}"
            obj["data"]["daemon-config.json"] = json.dumps(config, indent=2)
        out.append(obj)
    return out


def _set_env(container: dict[str, Any], values: Mapping[str, str]) -> None:
    env = container.setdefault("env", [])
    for key, value in values.items():
        for entry in env:
            if entry["name"] == key:
                entry.clear()
                entry.update(name=key, value=value)
                break
        else:
            env.append({"name": key, "value": value})


class ServiceProxy:
    """kube-proxy's rule for the ``kubernetes`` Service, and only that one (see the module's doc)."""

    def __init__(self, cluster_ip: str, port: int, api_port: int) -> None:
        self.rule = [
            "OUTPUT", "-d", f"{cluster_ip}/32", "-p", "tcp", "--dport", str(port),
            "-j", "DNAT", "--to-destination", f"127.0.0.1:{api_port}",
            "-m", "comment", "--comment", COMMENT,
        ]  # fmt: skip
        self.installed = False

    def start(self) -> None:
        # A bed killed before its teardown left its rule; one at a time holds this ClusterIP.
        while self._delete_one():
            pass
        out = subprocess.run(["iptables", "-t", "nat", "-A", *self.rule], capture_output=True, text=True)
        if out.returncode != 0:
            raise InstallError(
                "ServiceProxyFailed", f"iptables refused the Service rule: {out.stderr.strip()}"
            )
        self.installed = True

    def _delete_one(self) -> bool:
        """Delete one rule of the bed's (whichever API server port it named)."""
        listed = subprocess.run(["iptables", "-t", "nat", "-S", "OUTPUT"], capture_output=True, text=True)
        for line in listed.stdout.splitlines():
            if f'"{COMMENT}"' in line and line.startswith("-A OUTPUT "):
                words = shlex.split(line)[2:]
                subprocess.run(
                    ["iptables", "-t", "nat", "-D", "OUTPUT", *words], capture_output=True, check=False
                )
                return True
        return False

    def stop(self) -> None:
        if self.installed:
            subprocess.run(["iptables", "-t", "nat", "-D", *self.rule], capture_output=True, check=False)
            self.installed = False


class Installation:
    """``deploy/`` on the bed: ``install()``, ``wait_ready(nodes)``, ``uninstall()``."""

    def __init__(
        self,
        api: client.ApiClient,
        *,
        kubeconfig: Path,
        api_port: int,
        tools: ToolSet,
        source: Path = BASE_DIR,
        say: Callable[[str], None] = lambda s: None,
    ) -> None:
        self.api, self.kubeconfig, self.api_port, self.source, self.say = (
            api,
            kubeconfig,
            api_port,
            source,
            say,
        )
        self.kubectl = tools.binary("kubectl", "kubectl")
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.docs: list[dict[str, Any]] = []
        self.proxy: ServiceProxy | None = None

    def run_kubectl(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        out = subprocess.run(
            [str(self.kubectl), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if out.returncode != 0:
            raise InstallError("KubectlFailed", f"kubectl {' '.join(args[:3])}: {out.stderr.strip()[-2000:]}")
        return out.stdout

    def render(self) -> list[dict[str, Any]]:
        text = self.run_kubectl("kustomize", str(self.source))
        return site_patches(d for d in yaml.safe_load_all(text) if d)

    def install(self) -> None:
        service = self.api.sanitize_for_serialization(
            self.core.read_namespaced_service("kubernetes", "default")
        )
        spec = service["spec"]
        self.proxy = ServiceProxy(spec["clusterIP"], int(spec["ports"][0]["port"]), self.api_port)
        self.proxy.start()
        self.docs = self.render()
        self.say(f"Applying {self.source.relative_to(REPO_ROOT)}/ with kubectl ({len(self.docs)} objects)...")
        self.apply(self.docs)

    def apply(self, docs: Iterable[Mapping[str, Any]]) -> None:
        stream = yaml.safe_dump_all(list(docs), sort_keys=False)
        self.run_kubectl(
            "apply", "--server-side", f"--field-manager={FIELD_MANAGER}", "-f", "-", stdin=stream
        )

    def set_driver_env(self, extra: Mapping[str, str]) -> bool:
        """The driver container's env as installed plus ``extra`` (an admin's ``kubectl set env``),
        which rolls the driver's Pods; False when it already was that (nothing rolls)."""
        (installed,) = [
            d for d in self.docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == DRIVER_DAEMONSET
        ]
        wanted = copy.deepcopy(installed["spec"]["template"]["spec"]["containers"][0])
        _set_env(wanted, extra)
        before = self.apps.read_namespaced_daemon_set(DRIVER_DAEMONSET, DRIVER_NAMESPACE).metadata
        # A JSON patch of the whole list: a merge by name would keep a replaced entry's valueFrom.
        patch = [{"op": "replace", "path": "/spec/template/spec/containers/0/env", "value": wanted["env"]}]
        after = self.apps.patch_namespaced_daemon_set(DRIVER_DAEMONSET, DRIVER_NAMESPACE, patch).metadata
        return bool(before is not None and after is not None and after.generation != before.generation)

    def pod_on(self, namespace: str, daemonset: str, node: str) -> dict[str, Any] | None:
        """The DaemonSet's current Pod on ``node`` (not one being deleted), if any."""
        pods = self.core.list_namespaced_pod(
            namespace,
            label_selector=f"app.kubernetes.io/name={daemonset}",
            field_selector=f"spec.nodeName={node}",
        )
        live = [
            p
            for p in self.api.sanitize_for_serialization(pods)["items"]
            if not p["metadata"].get("deletionTimestamp")
        ]
        return live[0] if live else None

    def wait_ready(self, node: str, explain: Callable[[], str] = lambda: "") -> None:
        """Both DaemonSets' Pods on ``node`` Ready."""
        for namespace, name in ((DRIVER_NAMESPACE, DRIVER_DAEMONSET), (CNI_NAMESPACE, CNI_DAEMONSET)):

            def ready(namespace: str = namespace, name: str = name) -> bool:
                pod = self.pod_on(namespace, name, node)
                conditions = ((pod or {}).get("status") or {}).get("conditions") or []
                return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

            try:
                wait_for(
                    ready, READY_TIMEOUT, what=f"{namespace}/{name}'s Pod on {node} to be Ready", interval=0.5
                )
            except WaitTimeout as exc:
                raise InstallError(
                    "InstallNotReady", f"{exc.message}\n{self.describe(namespace, name, node)}\n{explain()}"
                ) from None

    def describe(self, namespace: str, daemonset: str, node: str) -> str:
        pod = self.pod_on(namespace, daemonset, node)
        if pod is None:
            return f"no {daemonset} Pod on {node}"
        status = pod.get("status") or {}
        statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        return f"{pod['metadata']['name']}: phase {status.get('phase')}; " + "; ".join(
            f"{s['name']}: {json.dumps(s.get('state'))} restarts {s.get('restartCount')}" for s in statuses
        )

    def uninstall(self) -> None:
        """Delete what ``install`` applied and wait until no Pod of it is left; then the proxy rule."""
        try:
            if self.docs:
                stream = yaml.safe_dump_all(self.docs, sort_keys=False)
                self.run_kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=stream)
                for namespace in (DRIVER_NAMESPACE, CNI_NAMESPACE):
                    with contextlib.suppress(WaitTimeout):
                        wait_for(
                            functools.partial(self._gone, namespace),
                            90,
                            what=f"namespace {namespace} deleted",
                            interval=0.5,
                        )
        finally:
            if self.proxy is not None:
                self.proxy.stop()

    def _gone(self, namespace: str) -> bool:
        try:
            self.core.read_namespace(namespace)
        except ApiException as exc:
            return bool(exc.status == 404)
        return False
