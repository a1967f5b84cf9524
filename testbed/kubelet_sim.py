"""A simulated kubelet for one node: the Pod lifecycle steps our product sits between, for real.

For every Pod bound to its node it does what kubelet and the container runtime do around a
sandbox, in their order: NodePrepareResources for each claim result of a driver whose plugin is
registered (other drivers' results count as prepared by their own plugins), a fresh network
namespace, CNI ADD through cnitool (libcni) with the CNI_ARGS containerd passes, then the Pod's
status goes Running with its podIP. A host-network Pod gets no sandbox network: no namespace, no
CNI. When the Pod gets a deletionTimestamp: CNI DEL and the namespace removed (the runtime's
StopPodSandbox), then NodeUnprepareResources, then the Pod deleted with grace period 0, as
kubelet's status manager does once the Pod has terminated.

No containers run; there is nothing to pull or start. Failures are kept per Pod (``errors``) and
retried on the next resync, like kubelet's pod workers. A Pod that left the API while this kubelet
still held something for it (a force delete, a failed teardown) is torn down on every resync until
that succeeds, like kubelet's housekeeping; :meth:`SimulatedKubelet.release_all` does what a node
going away does to whatever is left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError

log = logging.getLogger(__name__)

ClaimRef = tuple[str, str, str]  # namespace, name, uid: what kubelet sends a DRA plugin
RESYNC_SECONDS = 2


def cnitool_container_id(netns_path: str) -> str:
    """The container ID cnitool gives an attachment: a hash of the absolute netns path (cnitool.go)."""
    return "cnitool-" + hashlib.sha512(netns_path.encode()).hexdigest()[:20]


class DraPlugin(Protocol):
    """The two kubelet-to-plugin calls (testbed.fake_kubelet.FakeKubelet speaks them over gRPC)."""

    def prepare(self, claims: list[ClaimRef]) -> dict[str, Any]: ...

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, Any]: ...


class KubeletError(ReasonedError):
    """A Pod could not be started or torn down by the simulated kubelet."""


@dataclass(frozen=True)
class Sandbox:
    namespace: str
    pod: str
    pod_uid: str
    netns: str

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"

    @property
    def container_id(self) -> str:
        return cnitool_container_id(self.netns_path)

    def cni_args(self) -> str:
        # The keys and order containerd's CRI plugin passes (K8S_POD_UID since containerd 1.7).
        return (
            f"IgnoreUnknown=1;K8S_POD_NAMESPACE={self.namespace};K8S_POD_NAME={self.pod};"
            f"K8S_POD_INFRA_CONTAINER_ID={self.container_id};K8S_POD_UID={self.pod_uid}"
        )


@dataclass(frozen=True)
class Cnitool:
    """CNI through the real cnitool: libcni loads ``network`` from ``net_dir`` and caches results."""

    binary: Path
    net_dir: Path
    bin_dir: Path
    network: str
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 120.0

    def _run(self, command: str, sandbox: Sandbox) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            **self.env,
            "NETCONFPATH": str(self.net_dir),
            "CNI_PATH": str(self.bin_dir),
            "CNI_ARGS": sandbox.cni_args(),
            "CNI_IFNAME": "eth0",
        }
        return subprocess.run(
            [str(self.binary), command, self.network, sandbox.netns_path],
            env=env,
            capture_output=True,
            text=True,
            timeout=self.timeout,
            check=False,
        )

    def add(self, sandbox: Sandbox) -> dict[str, Any]:
        out = self._run("add", sandbox)
        if out.returncode != 0:
            raise KubeletError("CniAddFailed", f"CNI ADD for {_pod_key(sandbox)}: {_tail(out)}")
        result: dict[str, Any] = json.loads(out.stdout)
        return result

    def delete(self, sandbox: Sandbox) -> None:
        out = self._run("del", sandbox)
        if out.returncode != 0:
            raise KubeletError("CniDelFailed", f"CNI DEL for {_pod_key(sandbox)}: {_tail(out)}")


class SandboxNetwork(Protocol):
    def add(self, sandbox: Sandbox) -> dict[str, Any]: ...

    def delete(self, sandbox: Sandbox) -> None: ...


def _tail(out: subprocess.CompletedProcess[str]) -> str:
    return (out.stdout + out.stderr).strip()[-2000:] or f"exit status {out.returncode}"


def _pod_key(sandbox: Sandbox) -> str:
    return f"Pod {sandbox.namespace}/{sandbox.pod}"


# -- pure helpers ---------------------------------------------------------------------------------


def pod_claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The ResourceClaim names a Pod uses: direct names, template claims through status, and the
    claim for its extended resources.

    An entry whose generated name is still unknown makes the Pod not ready to start (kubelet waits).
    """
    spec_claims = (pod.get("spec") or {}).get("resourceClaims") or []
    statuses = {
        s["name"]: s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names: list[str] = []
    for entry in spec_claims:
        direct = entry.get("resourceClaimName")
        if direct:
            names.append(direct)
        elif entry["name"] not in statuses:
            raise KubeletError(
                "ClaimNotGenerated",
                f"Pod {pod['metadata']['name']}: claim for {entry['name']} not created yet",
            )
        elif statuses[entry["name"]]:
            names.append(str(statuses[entry["name"]]))
    # As the real kubelet does (DRAExtendedResource): the scheduler's claim for the Pod's
    # extended resources, named only in its status.
    extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        names.append(str(extended))
    return list(dict.fromkeys(names))


def claim_drivers(claim: Mapping[str, Any]) -> set[str]:
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise KubeletError(
            "ClaimNotAllocated", f"claim {claim['metadata']['name']} has no allocation; kubelet waits"
        )
    return {r["driver"] for r in allocation["devices"].get("results") or []}


def pod_ips(result: Mapping[str, Any]) -> list[str]:
    return [ip["address"].split("/")[0] for ip in result.get("ips") or []]


def host_interfaces(result: Mapping[str, Any]) -> list[str]:
    """Interfaces a CNI result reports outside any sandbox: host ends such as ptp's veth."""
    return [str(i["name"]) for i in result.get("interfaces") or [] if i.get("name") and not i.get("sandbox")]


# -- the kubelet ----------------------------------------------------------------------------------


@dataclass
class PodRecord:
    sandbox: Sandbox
    claims: dict[str, list[ClaimRef]]  # driver -> claims prepared through its plugin
    result: dict[str, Any]
    stopped: bool = False  # CNI DEL done and the netns removed; only the unprepare is left


class SimulatedKubelet:
    """Start with :meth:`start`, stop with :meth:`stop`; or call :meth:`sync_all` yourself."""

    def __init__(
        self,
        api: client.ApiClient,
        node_name: str,
        plugins: Mapping[str, DraPlugin],
        network: SandboxNetwork,
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.resource = client.CustomObjectsApi(api)
        self.node_name = node_name
        self.plugins = dict(plugins)
        self.network = network
        self.pods: dict[str, PodRecord] = {}
        self.host_pods: dict[str, dict[str, list[ClaimRef]]] = {}  # host-network Pods: claims only
        self.errors: dict[str, str] = {}
        self.log: list[str] = []
        # Every sandbox this kubelet made and the host-side links their ADDs reported: what a leak
        # check looks for after teardown, whatever happened to the records meanwhile.
        self.created: list[Sandbox] = []
        self.host_links: set[str] = set()
        # NodePrepareResources calls made, so tests can prove an operation made none.
        self.prepare_calls = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self, pod_uid: str) -> PodRecord | None:
        with self._lock:
            return self.pods.get(pod_uid)

    def made(self) -> tuple[list[Sandbox], set[str], set[str]]:
        """Every sandbox made so far, the host links their ADDs reported, and the netns still held."""
        with self._lock:
            held = {record.sandbox.netns for record in self.pods.values()}
            return list(self.created), set(self.host_links), held

    # -- loop ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubelet-sim", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(RESYNC_SECONDS * 5)
            self._thread = None

    def _run(self) -> None:
        selector = f"spec.nodeName={self.node_name}"
        while not self._stop.is_set():
            try:
                version = self.sync_all()
                stream = watch.Watch()
                for event in stream.stream(
                    self.core.list_pod_for_all_namespaces,
                    field_selector=selector,
                    resource_version=version,
                    timeout_seconds=RESYNC_SECONDS,
                ):
                    if self._stop.is_set():
                        stream.stop()
                        break
                    pod = self.core.api_client.sanitize_for_serialization(event["object"])
                    if event["type"] == "DELETED":
                        self._forget(pod)
                    else:
                        self.sync(pod)
            except Exception as exc:  # the loop must survive API hiccups, as kubelet's does
                self._note("loop", f"{type(exc).__name__}: {exc}")
                self._stop.wait(0.5)

    def sync_all(self) -> str:
        listed = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={self.node_name}")
        pods = [self.core.api_client.sanitize_for_serialization(pod) for pod in listed.items]
        for pod in pods:
            self.sync(pod)
        self._housekeeping({pod["metadata"]["uid"] for pod in pods})
        return str(listed.metadata.resource_version if listed.metadata else "")

    def _housekeeping(self, listed: set[str]) -> None:
        """Tear down what is held for Pods the API no longer has: a DELETED event this kubelet
        missed or whose teardown failed would otherwise leave the sandbox for good."""
        with self._lock:
            for uid in (set(self.pods) | set(self.host_pods)) - listed:
                self._release_gone(uid)

    def sync(self, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        with self._lock:
            try:
                pending = (pod.get("status") or {}).get("phase", "Pending") == "Pending"
                if pod["metadata"].get("deletionTimestamp"):
                    self._terminate(pod)
                elif not pending:
                    return
                elif uid in self.pods or uid in self.host_pods:
                    # started, but the status write failed: only that is retried
                    self._mark_running(pod, self.pods[uid].result if uid in self.pods else {})
                else:
                    self._start(pod)
                self.errors.pop(uid, None)
            except (ReasonedError, ApiException, subprocess.SubprocessError, OSError) as exc:
                self._note(uid, f"{pod['metadata']['namespace']}/{pod['metadata']['name']}: {exc}")

    def _note(self, key: str, message: str) -> None:
        self.errors[key] = message
        self.log.append(message)
        log.info("kubelet-sim: %s", message)

    def _forget(self, pod: Mapping[str, Any]) -> None:
        # Deleted behind kubelet's back (force delete): tear down what it still holds.
        with self._lock:
            self._release_gone(pod["metadata"]["uid"])

    def _release_gone(self, uid: str) -> None:
        try:
            self._release(uid)
        except (ReasonedError, OSError, subprocess.SubprocessError) as exc:
            # Kept, so the next resync's housekeeping retries it.
            self._note(uid, f"teardown of deleted Pod {uid}: {exc}")
        else:
            self.errors.pop(uid, None)

    def _release(self, uid: str) -> None:
        """Tear down what this kubelet holds for a Pod; what fails stays held for a retry."""
        record = self.pods.get(uid)
        if record is not None:
            self._teardown(record)
            del self.pods[uid]
        claims = self.host_pods.get(uid)
        if claims is not None:
            self._unprepare(claims)
            del self.host_pods[uid]

    # -- start ----------------------------------------------------------------------------------

    def _claims_by_driver(self, pod: Mapping[str, Any]) -> dict[str, list[ClaimRef]]:
        namespace = pod["metadata"]["namespace"]
        out: dict[str, list[ClaimRef]] = {}
        for name in pod_claim_names(pod):
            claim: dict[str, Any] = self.resource.get_namespaced_custom_object(  # type: ignore[assignment]
                "resource.k8s.io", "v1", namespace, "resourceclaims", name
            )
            for driver in sorted(claim_drivers(claim)):
                if driver in self.plugins:
                    out.setdefault(driver, []).append((namespace, name, claim["metadata"]["uid"]))
        return out

    def _prepare(self, claims: Mapping[str, list[ClaimRef]]) -> None:
        for driver, refs in claims.items():
            self.prepare_calls += 1
            answers = self.plugins[driver].prepare(refs)
            failed = {uid: a.error for uid, a in answers.items() if a.error}
            missing = {uid for _, _, uid in refs} - set(answers)
            if failed or missing:
                raise KubeletError(
                    "PrepareFailed",
                    f"NodePrepareResources via {driver}: errors {failed}, no answer for {sorted(missing)}",
                )

    def _start(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        claims = self._claims_by_driver(pod)
        self._prepare(claims)
        if (pod.get("spec") or {}).get("hostNetwork"):
            # The Pod shares the node's network namespace: the runtime makes no netns, calls no CNI.
            self.host_pods[meta["uid"]] = claims
            self._mark_running(pod, {})
            return
        sandbox = self._new_sandbox(meta)
        result = self._add(sandbox)
        self.pods[meta["uid"]] = PodRecord(sandbox, claims, result)
        self._mark_running(pod, result)

    def _new_sandbox(self, meta: Mapping[str, Any]) -> Sandbox:
        sandbox = Sandbox(meta["namespace"], meta["name"], meta["uid"], f"ks-{secrets.token_hex(5)}")
        subprocess.run(["ip", "netns", "add", sandbox.netns], check=True, capture_output=True)
        self.created.append(sandbox)
        return sandbox

    def _add(self, sandbox: Sandbox) -> dict[str, Any]:
        try:
            result = self.network.add(sandbox)
            self.host_links.update(host_interfaces(result))
            return result
        except BaseException:
            # The runtime tears a half-made sandbox down before the next attempt, however ADD
            # failed (a timeout, unreadable output): the next attempt makes a new one.
            with contextlib.suppress(ReasonedError, OSError, subprocess.SubprocessError):
                self.network.delete(sandbox)
            # A failed removal must not hide why ADD failed; the teardown checks name the netns.
            with contextlib.suppress(ReasonedError):
                _remove_netns(sandbox)
            raise

    def _mark_running(self, pod: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ips = pod_ips(result)
        conditions = [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
        ]
        body = {
            "status": {
                "phase": "Running",
                "startTime": now,
                "conditions": conditions,
                **({"podIP": ips[0], "podIPs": [{"ip": ip} for ip in ips]} if ips else {}),
            }
        }
        self.core.patch_namespaced_pod_status(meta["name"], meta["namespace"], body)

    # -- sandbox re-creation ----------------------------------------------------------------

    def recreate_sandbox(self, pod_uid: str) -> PodRecord:
        """What a runtime does when a sandbox dies: DEL, a new netns, ADD; no new prepare."""
        with self._lock:
            record = self.pods[pod_uid]
            self.network.delete(record.sandbox)
            _remove_netns(record.sandbox)
            old = record.sandbox
            sandbox = self._new_sandbox({"namespace": old.namespace, "name": old.pod, "uid": old.pod_uid})
            record.sandbox = sandbox
            record.result = self._add(sandbox)
            return record

    # -- termination ----------------------------------------------------------------------------

    def _teardown(self, record: PodRecord) -> None:
        # StopPodSandbox (CNI DEL, then the netns goes) comes before kubelet unprepares the claims,
        # so a failed unprepare keeps only the claims for the retry, not the sandbox.
        if not record.stopped:
            self.network.delete(record.sandbox)
            _remove_netns(record.sandbox)
            record.stopped = True
        self._unprepare(record.claims)

    def _unprepare(self, claims: Mapping[str, list[ClaimRef]]) -> None:
        for driver, refs in claims.items():
            answers = self.plugins[driver].unprepare(refs)
            failed = {uid: a.error for uid, a in answers.items() if a.error}
            if failed:
                raise KubeletError("UnprepareFailed", f"NodeUnprepareResources via {driver}: {failed}")

    def release_all(self) -> list[str]:
        """What the node going away does to every sandbox still held; call after :meth:`stop`.

        The netns goes even when CNI DEL fails, as nothing would retry it. Returns one line per Pod
        that still had a sandbox (and why its teardown failed, if it did): each is a Pod that was
        running, or a teardown left undone, when the node stopped.
        """
        held = []
        with self._lock:
            for uid, record in list(self.pods.items()):
                line = f"{_pod_key(record.sandbox)} still had sandbox {record.sandbox.netns}"
                try:
                    self._teardown(record)
                except (ReasonedError, OSError, subprocess.SubprocessError) as exc:
                    line += f"; its teardown failed: {exc}"
                    with contextlib.suppress(ReasonedError):
                        _remove_netns(record.sandbox)
                held.append(line)
                del self.pods[uid]
            for uid, claims in list(self.host_pods.items()):
                try:
                    self._unprepare(claims)
                except (ReasonedError, OSError, subprocess.SubprocessError) as exc:
                    held.append(f"host-network Pod {uid}: unprepare failed: {exc}")
                del self.host_pods[uid]
        return held

    def _terminate(self, pod: Mapping[str, Any]) -> None:
        meta = pod["metadata"]
        self._release(meta["uid"])
        options = client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=meta["uid"])
        )
        try:
            self.core.delete_namespaced_pod(meta["name"], meta["namespace"], body=options)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise


def _remove_netns(sandbox: Sandbox) -> None:
    out = subprocess.run(["ip", "netns", "del", sandbox.netns], check=False, capture_output=True, text=True)
    # Already gone is done; still there is a teardown to retry, not one to forget.
    if out.returncode != 0 and Path(sandbox.netns_path).exists():
        raise KubeletError("NetnsNotRemoved", f"ip netns del {sandbox.netns}: {_tail(out)}")
