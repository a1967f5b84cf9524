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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError
from testbed.deployment import BASE_DIR, CNI_NAMESPACE, DEPLOY_DIR, DRIVER_NAMESPACE, OPERATOR_DIR, REPO_ROOT
from testbed.fakesysfs import DEV_DIR
from testbed.realnode import KUBELET_ROOT
from testbed.tools import ToolSet
from testbed.waiting import WaitTimeout, wait_for

BUILD_IMAGES = REPO_ROOT / "scripts" / "build_images.py"
# Where a node's mount namespace shows the bed's simulated hardware.
BED_ROOT = Path("/run/auto-sriov-bed")
BED_SYSFS = BED_ROOT / "sys"
DRIVER_DAEMONSET = "sriov-dra-driver"
CNI_DAEMONSET = "cni-shim"
# The two DaemonSets every node runs, as (namespace, name).
NODE_AGENTS = ((DRIVER_NAMESPACE, DRIVER_DAEMONSET), (CNI_NAMESPACE, CNI_DAEMONSET))
DAEMON_CONFIG = "cni-shim-daemon-config"
OPERATOR_DEPLOYMENT = "sriov-network-operator"
NODE_STATE_DAEMONSET = "sriov-node-state"
READY_TIMEOUT = 180.0
FIELD_MANAGER = "auto-sriov-bed"
COMMENT = "auto-sriov bed: kubernetes Service"  # marks the bed's iptables rules
CHAINS = ("OUTPUT",)
KUSTOMIZE, HELM = "kustomize", "helm"  # how the installation is applied
CHART_DIR = DEPLOY_DIR / "helm" / "auto-sriov"
RELEASE, RELEASE_NAMESPACE = "auto-sriov", "default"
# The chart's values for the bed's site settings (what site_patches does to the kustomize build).
SITE_VALUES = (
    # The bed's control plane carries the CRDs from its start (other suites need them), and the
    # namespaces may outlive an earlier stack: Helm adopts neither, so the bed makes them.
    "crds.install=false",
    "namespaces.create=false",
    "driver.multusAutoAttach=true",
    "driver.metricsPort=0",
    "cni.metricsPort=0",
    f"driver.sysfsHostPath={BED_SYSFS}",
    f"driver.devRoot={BED_SYSFS / DEV_DIR}",
    f"cni.sysfsRoot=/hostroot{BED_SYSFS}",
)


# How a stack runs the product on its nodes: host processes of the bed, or installed as
# DaemonSets by kubectl from deploy/base/ or by helm from the chart.
PROCESSES, DAEMONSETS, HELM_CHART = "processes", "daemonsets", "helm"


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
                pod["containers"][0],
                {
                    "MULTUS_AUTO_ATTACH": str(auto_attach).lower(),
                    "METRICS_PORT": "0",
                    # The fake node's device nodes, as its containerd sees them (CDI hostPaths).
                    "DEV_ROOT": str(BED_SYSFS / DEV_DIR),
                },
            )
            _bed_sysfs(pod)
        elif kind == "DaemonSet" and name == NODE_STATE_DAEMONSET:
            _bed_sysfs(obj["spec"]["template"]["spec"])
        elif kind == "Deployment" and name == OPERATOR_DEPLOYMENT:
            # The bed's API server listens on loopback, which no cluster-network Pod can reach; on
            # the host network the kubernetes Service's rule (ServiceProxy) takes it there.
            pod = obj["spec"]["template"]["spec"]
            pod["hostNetwork"] = True
            pod["dnsPolicy"] = "ClusterFirstWithHostNet"
        elif kind == "ConfigMap" and name == DAEMON_CONFIG:
            config = json.loads(obj["data"]["daemon-config.json"])
            config["metricsPort"] = 0
            config["sysfsRoot"] = f"/hostroot{BED_SYSFS}"
            obj["data"]["daemon-config.json"] = json.dumps(config, indent=2)
        out.append(obj)
    return out


def _bed_sysfs(pod: dict[str, Any]) -> None:
    for volume in pod["volumes"]:
        if volume["name"] == "sysfs":
            volume["hostPath"]["path"] = str(BED_SYSFS)


def _key(doc: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = doc.get("metadata") or {}
    return str(doc.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


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
    """kube-proxy's rule for the ``kubernetes`` Service, and only that (see the module's doc): in
    OUTPUT, for Pods on the host network, which is every Pod of the product on the bed (the
    cluster network's Pods cannot reach the loopback API server through it)."""

    def __init__(self, cluster_ip: str, port: int, api_port: int) -> None:
        self.match = [
            "-d", f"{cluster_ip}/32", "-p", "tcp", "--dport", str(port),
            "-j", "DNAT", "--to-destination", f"127.0.0.1:{api_port}",
            "-m", "comment", "--comment", COMMENT,
        ]  # fmt: skip
        self.installed: list[str] = []

    def start(self) -> None:
        # A bed killed before its teardown left its rules; one at a time holds this ClusterIP.
        for chain in CHAINS:
            while self._delete_one(chain):
                pass
        for chain in CHAINS:
            out = subprocess.run(
                ["iptables", "-t", "nat", "-A", chain, *self.match],
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode != 0:
                raise InstallError(
                    "ServiceProxyFailed", f"iptables refused the Service rule: {out.stderr.strip()}"
                )
            self.installed.append(chain)

    def _delete_one(self, chain: str) -> bool:
        """Delete one rule of the bed's in ``chain`` (whichever API server port it named)."""
        listed = subprocess.run(
            ["iptables", "-t", "nat", "-S", chain], capture_output=True, text=True, check=False
        )
        for line in listed.stdout.splitlines():
            if f'"{COMMENT}"' in line and line.startswith(f"-A {chain} "):
                words = shlex.split(line)[2:]
                subprocess.run(
                    ["iptables", "-t", "nat", "-D", chain, *words], capture_output=True, check=False
                )
                return True
        return False

    def stop(self) -> None:
        for chain in self.installed:
            subprocess.run(
                ["iptables", "-t", "nat", "-D", chain, *self.match], capture_output=True, check=False
            )
        self.installed = []


def _last_exit(status: dict[str, Any]) -> str:
    """How the container's previous run ended: its exit code and the termination message, which
    FallbackToLogsOnError fills with the log's tail when the container wrote none."""
    ended = (status.get("lastState") or {}).get("terminated")
    if not ended:
        return ""
    return f"; last exit {ended.get('exitCode')} ({ended.get('reason')}):\n{ended.get('message') or ''}"


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
        via: str = KUSTOMIZE,
        say: Callable[[str], None] = lambda s: None,
        before_uninstall: Callable[[], None] = lambda: None,
    ) -> None:
        """``via``: ``kustomize`` applies ``source`` with kubectl; ``helm`` installs the chart
        with the bed's site values (``SITE_VALUES``) as a release. ``before_uninstall``: what
        the nodes must finish while the product still serves them."""
        self.before_uninstall = before_uninstall
        self.api, self.kubeconfig, self.api_port, self.source, self.say = (
            api,
            kubeconfig,
            api_port,
            source,
            say,
        )
        self.kubectl = tools.binary("kubectl", "kubectl")
        self.via = via
        self.helm_binary = tools.binary("helm", "helm") if via == HELM else None
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.docs: list[dict[str, Any]] = []
        self.proxy: ServiceProxy | None = None

    def run_kubectl(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        return self._run(self.kubectl, *args, stdin=stdin, timeout=timeout)

    def helm(self, *args: str, timeout: float = 300) -> str:
        """``helm`` against the bed, in the release's namespace."""
        assert self.helm_binary is not None, "an Installation via helm"
        return self._run(self.helm_binary, *args, "--namespace", RELEASE_NAMESPACE, timeout=timeout)

    def _run(self, tool: Path, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        out = subprocess.run(
            [str(tool), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if out.returncode != 0:
            raise InstallError(
                f"{tool.name.capitalize()}Failed",
                f"{tool.name} {' '.join(args[:3])}: {out.stderr.strip()[-2000:]}",
            )
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
        if self.via == HELM:
            for namespace in (DRIVER_NAMESPACE, CNI_NAMESPACE):
                with contextlib.suppress(ApiException):
                    self.core.create_namespace(
                        client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace))
                    )
            self.say(f"Installing the chart {CHART_DIR.relative_to(REPO_ROOT)}/ with helm...")
            # --take-ownership: the bed's earlier stacks applied the same ServiceAccounts and RBAC
            # for their host processes, as a cluster moving from the kustomize install would have.
            self.helm("install", RELEASE, str(CHART_DIR), "--take-ownership", *self.site_flags())
            self.docs = [d for d in yaml.safe_load_all(self.helm("get", "manifest", RELEASE)) if d]
            return
        self.docs = self.render()
        self.say(f"Applying {self.source.relative_to(REPO_ROOT)}/ with kubectl ({len(self.docs)} objects)...")
        self.apply(self.docs)

    @staticmethod
    def site_flags(*more: str) -> list[str]:
        return [flag for value in (*SITE_VALUES, *more) for flag in ("--set", value)]

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

    def ready_pod(self, namespace: str, daemonset: str, node: str) -> dict[str, Any] | None:
        """The DaemonSet's current Pod on ``node`` when it is Ready."""
        pod = self.pod_on(namespace, daemonset, node)
        conditions = ((pod or {}).get("status") or {}).get("conditions") or []
        return pod if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None

    def wait_ready(self, node: str, explain: Callable[[], str] = lambda: "") -> None:
        """Both DaemonSets' Pods on ``node`` Ready."""
        for namespace, name in NODE_AGENTS:

            def ready(namespace: str = namespace, name: str = name) -> bool:
                return self.ready_pod(namespace, name, node) is not None

            try:
                wait_for(
                    ready, READY_TIMEOUT, what=f"{namespace}/{name}'s Pod on {node} to be Ready", interval=0.5
                )
            except WaitTimeout as exc:
                raise InstallError(
                    "InstallNotReady", f"{exc.message}\n{explain()}\n{self.describe(namespace, name, node)}"
                ) from None

    def describe(self, namespace: str, daemonset: str, node: str) -> str:
        pod = self.pod_on(namespace, daemonset, node)
        if pod is None:
            return f"no {daemonset} Pod on {node}"
        status = pod.get("status") or {}
        statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        return f"{pod['metadata']['name']}: phase {status.get('phase')}; " + "; ".join(
            f"{s['name']}: {json.dumps(s.get('state'))} restarts {s.get('restartCount')}{_last_exit(s)}"
            for s in statuses
        )

    def uninstall(self) -> None:
        """Delete what ``install`` applied and wait until no Pod of it is left; then the proxy rule."""
        try:
            self.before_uninstall()
            if self.via == HELM and self.docs:
                try:
                    self.helm("uninstall", RELEASE, "--ignore-not-found", "--wait", "--timeout", "120s")
                except InstallError:
                    # The bed must end clean even when the pre-delete check refused (a test that
                    # failed while a managed Pod ran): the teardown's own checks say what was left.
                    self.helm("uninstall", RELEASE, "--ignore-not-found", "--no-hooks", "--wait")
            elif self.docs:
                self.delete(self.removable())
            if self.docs:
                # The namespaces it created (not the ones a Helm release was installed into).
                for namespace in [d["metadata"]["name"] for d in self.docs if d["kind"] == "Namespace"]:
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

    def delete(self, docs: Iterable[Mapping[str, Any]]) -> None:
        stream = yaml.safe_dump_all(list(docs), sort_keys=False)
        self.run_kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=stream)

    def operator_docs(self) -> list[dict[str, Any]]:
        """What deploy/operator/ adds to the base installation: its namespace and RBAC, the
        operator's Deployment and the node-state DaemonSet, with the bed's site settings. Not its
        CRDs (the bed carries them from its start), nor its patch of the driver's policy namespace
        (the scenario switches that, and back)."""
        base = {_key(d) for d in self.docs}
        rendered = yaml.safe_load_all(self.run_kubectl("kustomize", str(OPERATOR_DIR)))
        return site_patches(
            d for d in rendered if d and d["kind"] != "CustomResourceDefinition" and _key(d) not in base
        )

    def debug_node(
        self, node: str, image: str, command: Sequence[str], log: Callable[[str, str], str]
    ) -> str:
        """``kubectl debug node/NODE --profile=sysadmin`` as docs/deploying.md's uninstall steps run
        it (without ``-it``: the bed's API server cannot dial a kubelet, so the Pod runs to its end
        and ``log`` reads its output from the node, by Pod UID and container). Returns the output;
        the Pod is deleted. Raises when the command failed."""
        prefix = f"node-debugger-{node}-"
        before = set(self._pod_names("default", prefix))
        self.run_kubectl(
            "debug", f"node/{node}", "--profile=sysadmin", f"--image={image}", "--image-pull-policy=Never",
            "--", *command,
        )  # fmt: skip
        made = sorted(set(self._pod_names("default", prefix)) - before)
        if len(made) != 1:
            raise InstallError("DebugPodUnknown", f"kubectl debug node/{node} made Pods {made}")
        (name,) = made
        try:

            def ended() -> dict[str, Any] | None:
                pod = self.api.sanitize_for_serialization(self.core.read_namespaced_pod(name, "default"))
                return pod if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None

            pod = wait_for(ended, READY_TIMEOUT, what=f"debug Pod {name} to end", interval=0.5)
            output = log(pod["metadata"]["uid"], "debugger")
            if pod["status"]["phase"] != "Succeeded":
                raise InstallError("DebugCommandFailed", f"{' '.join(command)} on {node}: {output[-2000:]}")
            return output
        finally:
            with contextlib.suppress(ApiException):
                self.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)

    def _pod_names(self, namespace: str, prefix: str) -> list[str]:
        listed = self.core.list_namespaced_pod(namespace)
        names = [str(p.metadata.name) for p in listed.items if p.metadata]
        return [n for n in names if n.startswith(prefix)]

    def removable(self) -> list[dict[str, Any]]:
        """The installation less its CRDs: the bed's control plane carries those from its start,
        and removing one deletes every object of its kind in the cluster, ours or not."""
        return [d for d in self.docs if d["kind"] != "CustomResourceDefinition"]

    def leftovers(self) -> list[str]:
        """What of the installation is still on the API server (``kind/name``), by kubectl."""
        if not self.docs:
            return []
        stream = yaml.safe_dump_all(self.removable(), sort_keys=False)
        out = self.run_kubectl("get", "--ignore-not-found", "-o", "name", "-f", "-", stdin=stream)
        return out.split()

    def _gone(self, namespace: str) -> bool:
        try:
            self.core.read_namespace(namespace)
        except ApiException as exc:
            return bool(exc.status == 404)
        return False
