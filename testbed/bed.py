"""A handle on one running bed: endpoints, identities, clients, audit log, tools; and its shutdown."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from sriov_contract.errors import ReasonedError
from testbed import access, kubeconfig, pki, probes, runstate
from testbed.audit import AuditLog
from testbed.processes import is_running, peak_rss_kib
from testbed.tools import ToolSet
from testbed.waiting import wait_for


class TestBed:
    """What tests and the CLI see of a bed; built from its ``state.json``."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(self, state: runstate.BedState, tools: ToolSet | None = None) -> None:
        self.state = state
        self.tools = tools or ToolSet()

    @classmethod
    def attach(cls, state_file: Path, tools: ToolSet | None = None) -> TestBed:
        """A handle on a bed some other process started (e.g. ``scripts/testbed up``)."""
        return cls(runstate.load(state_file), tools)

    @property
    def server(self) -> str:
        return self.state.server

    @property
    def ca_file(self) -> Path:
        return self.state.ca_file

    @property
    def kubeconfig(self) -> Path:
        return self.kubeconfig_for("admin")

    @property
    def log_dir(self) -> Path:
        return self.state.log_dir

    @property
    def node_name(self) -> str:
        return self.state.node_name

    @property
    def node_uid(self) -> str:
        return self.state.node_uid

    @property
    def state_file(self) -> Path:
        return self.state.path

    def kubeconfig_for(self, identity: str) -> Path:
        try:
            return Path(self.state.kubeconfigs[identity])
        except KeyError:
            raise ReasonedError(
                "UnknownIdentity",
                f"the test bed has no identity {identity!r}; known: {', '.join(sorted(self.state.kubeconfigs))}; "
                "use issue_identity() to add one",
            ) from None

    def user_of(self, identity: str) -> str:
        """The user name the apiserver sees (and the audit log records) for ``identity``."""
        for ident in kubeconfig.IDENTITIES:
            if ident.name == identity:
                return ident.user
        return identity

    def issue_identity(self, name: str, user: str, groups: Sequence[str] = ()) -> Path:
        """Mint a client cert for a new user from the bed CA and return its kubeconfig."""
        ca = pki.CertificateAuthority.open(self.state.pki_dir)
        pair = ca.issue_client(name, user, tuple(groups))
        path = self.state.run_dir / "kubeconfig" / f"{name}.json"
        kubeconfig.write(path, kubeconfig.render(self.server, ca.cert_file, name, pair.cert, pair.key))
        self.state.kubeconfigs[name] = str(path)
        return path

    def client_for(self, identity: str) -> client.ApiClient:
        """A new ApiClient authenticated as ``identity``; the caller closes it."""
        api: client.ApiClient = kube_config.new_client_from_config(
            config_file=str(self.kubeconfig_for(identity))
        )
        return api

    @cached_property
    def api_client(self) -> client.ApiClient:
        """The admin client (system:masters), shared for the bed's lifetime."""
        return self.client_for("admin")

    @cached_property
    def audit(self) -> AuditLog:
        return AuditLog(self.state.audit_log)

    def tool_dir(self, component: str) -> Path:
        return self.tools.require(component)

    def grant(self, user: str, rules: Sequence[Mapping[str, Any]], *, namespace: str | None = None) -> str:
        return access.grant(self.api_client, user, rules, namespace=namespace)

    def create_namespace(self, name: str, *, exist_ok: bool = False) -> str:
        """Create namespace `name` and wait until Pods can be created in it.

        The API server refuses Pods until the serviceaccount controller made the default account.
        """
        core = client.CoreV1Api(self.api_client)
        try:
            core.create_namespace(client.V1Namespace.model_validate({"metadata": {"name": name}}))
        except ApiException as exc:
            if not (exist_ok and exc.status == 409):
                raise
        wait_for(
            lambda: core.read_namespaced_service_account("default", name),
            30.0,
            what=f"ServiceAccount {name}/default",
            ignore=(ApiException,),
        )
        return name

    def apply(self, objects: Iterable[Mapping[str, Any]]) -> list[Any]:
        return access.apply_objects(self.api_client, objects)

    def healthy(self) -> bool:
        return (
            self.state.ready
            and runstate.processes_alive(self.state)
            and probes.healthy(self.state.ports["apiserver"], "/readyz", tls=True, ca_file=self.ca_file)
        )

    def peak_rss_kib(self) -> dict[str, int]:
        """Peak resident memory so far of each live control-plane process (dead ones are absent)."""
        peaks = {}
        for rec in self.state.processes:
            kib = peak_rss_kib(rec.pid) if is_running(rec.pid, rec.start_ticks) else None
            if kib is not None:
                peaks[rec.name] = kib
        return peaks

    def stop(self, *, keep_logs: bool = False) -> None:
        if "api_client" in self.__dict__:
            with contextlib.suppress(Exception):
                self.api_client.close()
            del self.__dict__["api_client"]
        runstate.dispose(self.state, keep_logs=keep_logs)
