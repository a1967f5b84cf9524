"""Bring up etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback.

Start-up order: etcd -> /health, kube-apiserver -> /readyz, CRDs Established and the Node, then
the controller-manager and scheduler -> /healthz. Any failure stops what already runs, keeps the
logs and says which component failed with the tail of its log.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubernetes import config as kube_config

from sriov_contract.errors import ReasonedError
from testbed import audit, bootstrap, kubeconfig, pki, probes, runstate
from testbed.bed import TestBed
from testbed.processes import ProcessRecord, free_port, launch, log_tail, stop
from testbed.tools import REPO_ROOT, ToolSet
from testbed.waiting import WaitTimeout, wait_for

CRD_DIR = REPO_ROOT / "deploy" / "base" / "crds"
# The operator path's CRDs ship in its overlay; the bed serves both paths.
OPERATOR_CRD_DIR = REPO_ROOT / "deploy" / "operator" / "crds"
SERVICE_CIDR = "10.0.0.0/24"
# Loaded 2-core machines have been seen to need 30-35 s before /readyz; leave ample headroom.
APISERVER = "kube-apiserver"
APISERVER_READY_TIMEOUT = 180.0
APISERVER_STOP_GRACE_S = 30.0
COMPONENT_READY_TIMEOUT = 90.0
PORT_ATTEMPTS = 3
KCM_CONTROLLERS = (
    # The installed product: its DaemonSets, the operator's Deployment, the chart's hook Job.
    "daemonset-controller",
    "deployment-controller",
    "replicaset-controller",
    "job-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "resourceclaim-controller",
    # Publishes kube-root-ca.crt into every namespace: a real kubelet cannot mount a Pod's
    # ServiceAccount token volume without it (the Pod hangs in ContainerCreating).
    "root-ca-certificate-publisher-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
)


# Gates the bed relies on, named although v1.36 has them on by default (beta), so a build that
# lacks one fails at start-up with "unrecognized feature gate" instead of running a quieter cluster:
# DRAExtendedResource (KEP-5004) lets a Pod ask for VFs in resources.limits against a DeviceClass's
# extendedResourceName; the API server keeps the fields, the scheduler makes the claim, the
# controller-manager's resourceclaim controller and the kubelet handle it.
FEATURE_GATES = {"DRAExtendedResource": True}


def feature_gates_flag() -> str:
    return "--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in sorted(FEATURE_GATES.items()))


class BedStartError(ReasonedError):
    """The control plane did not come up; the message names the component and its log."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    apiserver: Path
    controller_manager: Path
    scheduler: Path

    @classmethod
    def resolve(cls, tools: ToolSet) -> Binaries:
        return cls(
            etcd=tools.binary("etcd", "etcd"),
            apiserver=tools.binary("k8s", "kube-apiserver"),
            controller_manager=tools.binary("k8s", "kube-controller-manager"),
            scheduler=tools.binary("k8s", "kube-scheduler"),
        )


def etcd_args(binary: Path, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    client_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    return [
        str(binary),
        "--name=testbed",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=testbed={peer_url}",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


def apiserver_args(binary: Path, state: runstate.BedState, etcd_port: int, port: int) -> list[str]:
    pkid = state.pki_dir
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        # Without it the apiserver looks for a default route, which a sandbox may not have.
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state.run_dir / 'apiserver-certs'}",
        f"--tls-cert-file={pkid / 'apiserver.crt'}",
        f"--tls-private-key-file={pkid / 'apiserver.key'}",
        f"--client-ca-file={pkid / 'ca.crt'}",
        # No front proxy exists; naming a CA and a CN nobody holds keeps the delegated
        # authenticators of the controller-manager and scheduler from logging a missing bundle.
        f"--requestheader-client-ca-file={pkid / 'ca.crt'}",
        "--requestheader-allowed-names=auto-sriov-no-front-proxy",
        "--requestheader-username-headers=X-Remote-User",
        "--authorization-mode=RBAC",
        f"--service-account-issuer=https://127.0.0.1:{port}",
        f"--service-account-key-file={pkid / 'sa.pub'}",
        f"--service-account-signing-key-file={pkid / 'sa.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # Real clusters allow privileged Pods; our DaemonSets need it to pass server-side dry run.
        "--allow-privileged=true",
        f"--audit-policy-file={state.run_dir / 'audit-policy.yaml'}",
        f"--audit-log-path={state.audit_log}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        # Tests count events from byte offsets: the log must never rotate under them.
        "--audit-log-maxsize=100000",
        "--profiling=false",
        feature_gates_flag(),
    ]


def component_args(binary: Path, state: runstate.BedState, identity: str, port: int) -> list[str]:
    kc = state.kubeconfigs[identity]
    return [
        str(binary),
        f"--kubeconfig={kc}",
        f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state.run_dir / (identity + '-certs')}",
        feature_gates_flag(),
    ]


def controller_manager_args(binary: Path, state: runstate.BedState, port: int) -> list[str]:
    return [
        *component_args(binary, state, "kube-controller-manager", port),
        f"--controllers={','.join(KCM_CONTROLLERS)}",
        f"--service-account-private-key-file={state.pki_dir / 'sa.key'}",
        f"--root-ca-file={state.ca_file}",
        "--use-service-account-credentials=false",
    ]


def new_run_id(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{secrets.token_hex(3)}"


def write_pki(state: runstate.BedState) -> None:
    ca = pki.CertificateAuthority.create(state.pki_dir)
    ca.issue_serving()
    pki.write_service_account_keys(state.pki_dir)
    for ident in kubeconfig.IDENTITIES:
        pair = ca.issue_client(ident.name, ident.user, ident.groups)
        path = state.run_dir / "kubeconfig" / f"{ident.name}.json"
        kubeconfig.write(path, kubeconfig.render(state.server, ca.cert_file, ident.name, pair.cert, pair.key))
        state.kubeconfigs[ident.name] = str(path)


class _Starter:
    def __init__(self, state: runstate.BedState, detached: bool) -> None:
        self.state = state
        self.detached = detached
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def launch(self, name: str, argv: Sequence[str]) -> None:
        proc, rec = launch(
            name,
            argv,
            self.state.log_dir / f"{name}.log",
            cwd=self.state.run_dir,
            die_with_parent=not self.detached,
        )
        self.procs[name] = proc
        self.state.processes.append(rec)
        self.state.save()

    def wait_healthy(
        self, name: str, port: int, path: str, *, tls: bool, verify: bool, timeout: float
    ) -> float:
        ca = self.state.ca_file if verify else None
        started = time.monotonic()

        def ready() -> bool:
            if self.procs[name].poll() is not None:
                raise self._failure(name, f"exited with code {self.procs[name].returncode}")
            return probes.healthy(port, path, tls=tls, ca_file=ca)

        try:
            wait_for(ready, timeout, what=f"{name} {path}", interval=0.2)
        except WaitTimeout as exc:
            raise self._failure(name, f"not healthy at {path} after {timeout:.0f}s") from exc
        return time.monotonic() - started

    def _failure(self, name: str, what: str) -> BedStartError:
        log = self.state.log_dir / f"{name}.log"
        return BedStartError(
            "TestBedStartFailed",
            f"{name} {what}; logs kept in {self.state.log_dir}. Last lines of {log}:\n{log_tail(log)}",
            component=name,
        )


def _version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False)
    text = (out.stdout or out.stderr).strip()
    found = re.search(r"v?\d+\.\d+\.\d+\S*", text)
    return found.group(0) if found else text.splitlines()[0] if text else "unknown"


def start(
    *,
    tools: ToolSet,
    run_id: str,
    node_name: str | None = None,
    root: Path | None = None,
    detached: bool = False,
    crd_dir: Path = CRD_DIR,
) -> TestBed:
    """Start a fresh bed (cleaning stale runs first) and return a handle to it."""
    binaries = Binaries.resolve(tools)
    root = root or runstate.default_root()
    runstate.cleanup_stale(root)
    node = node_name or os.environ.get("TESTBED_NODE_NAME", "sriov-node-0")
    for attempt in range(1, PORT_ATTEMPTS + 1):
        state = runstate.new_state(root, run_id, node)
        state.log_dir.mkdir(parents=True, exist_ok=True)
        state.save()
        try:
            _bring_up(_Starter(state, detached), binaries, crd_dir)
            return TestBed(state, tools)
        except BedStartError as exc:
            # Ports are picked free but bound later; a bed starting concurrently can take one.
            retry = attempt < PORT_ATTEMPTS and "address already in use" in exc.message
            runstate.dispose(state, keep_logs=not retry)
            if not retry:
                raise
        except BaseException:
            runstate.dispose(state, keep_logs=True)
            raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _bring_up(starter: _Starter, binaries: Binaries, crd_dir: Path) -> None:
    state = starter.state
    names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler")
    state.ports = {n: free_port() for n in names}
    state.server = f"https://127.0.0.1:{state.ports['apiserver']}"
    write_pki(state)
    (state.run_dir / "audit-policy.yaml").write_text(audit.POLICY)
    state.versions = {"etcd": _version(binaries.etcd), "kubernetes": _version(binaries.apiserver)}
    state.save()

    state.etcd_data_dir.mkdir(parents=True, exist_ok=True)
    starter.launch(
        "etcd", etcd_args(binaries.etcd, state.etcd_data_dir, state.ports["etcd"], state.ports["etcd-peer"])
    )
    starter.wait_healthy("etcd", state.ports["etcd"], "/health", tls=False, verify=False, timeout=30.0)

    state.timings["apiserver_ready_s"] = round(_launch_apiserver(starter, binaries.apiserver), 2)

    api = kube_config.new_client_from_config(config_file=state.kubeconfigs["admin"])
    try:
        for directory in (crd_dir, OPERATOR_CRD_DIR):
            bootstrap.install_crds(api, directory)
        state.node_uid = bootstrap.create_node(api, state.node_name)
    finally:
        api.close()
    state.save()

    starter.launch(
        "kube-controller-manager",
        controller_manager_args(binaries.controller_manager, state, state.ports["controller-manager"]),
    )
    starter.launch(
        "kube-scheduler",
        component_args(binaries.scheduler, state, "kube-scheduler", state.ports["scheduler"]),
    )
    for name, port in (("kube-controller-manager", "controller-manager"), ("kube-scheduler", "scheduler")):
        starter.wait_healthy(
            name, state.ports[port], "/healthz", tls=True, verify=False, timeout=COMPONENT_READY_TIMEOUT
        )

    state.ready = True
    if starter.detached:
        state.owner_pid = state.owner_ticks = None
    state.save()


def _launch_apiserver(starter: _Starter, binary: Path) -> float:
    """Launch kube-apiserver with the bed's ports and certificates; returns the time to /readyz."""
    state = starter.state
    starter.launch(APISERVER, apiserver_args(binary, state, state.ports["etcd"], state.ports["apiserver"]))
    return starter.wait_healthy(
        APISERVER, state.ports["apiserver"], "/readyz", tls=True, verify=True, timeout=APISERVER_READY_TIMEOUT
    )


def _apiserver_record(bed: TestBed) -> ProcessRecord:
    for rec in bed.state.processes:
        if rec.name == APISERVER:
            return rec
    raise BedStartError("NoApiServer", f"the bed in {bed.state.run_dir} runs no {APISERVER}")


def stop_apiserver(bed: TestBed) -> None:
    """SIGTERM the bed's kube-apiserver, as an upgrade or a crash would, and wait until it exited:
    its watches end as in a real outage. Everything else of the bed keeps running."""
    stop([_apiserver_record(bed)], grace=APISERVER_STOP_GRACE_S)


def start_apiserver(bed: TestBed) -> float:
    """Start kube-apiserver again on the same port, certificates and etcd, and wait until it is
    ready; returns how long that took. Its watch cache starts empty, so a watch resumed from an
    older resourceVersion gets 410 Gone. An attached bed's processes die with the thread that
    starts them: call this from a thread that outlives the bed."""
    state = bed.state
    state.processes.remove(_apiserver_record(bed))
    starter = _Starter(state, detached=state.owner_pid is None)
    return _launch_apiserver(starter, Binaries.resolve(bed.tools).apiserver)
