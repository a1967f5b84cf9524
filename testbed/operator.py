"""sriov-operator under exactly its shipped RBAC (deploy/operator/rbac.yaml), as a subprocess.

Each test gets its own operator namespace: the shipped manifests are applied with only the
namespace (and the cluster-scoped names, which must not collide between tests) substituted, so
what the apiserver authorizes is what an installation grants. The operator runs with a long
resync so that a missing watch cannot be hidden by periodic passes.
"""

from __future__ import annotations

import copy
import json
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from testbed import processes
from testbed.apiobjects import present
from testbed.bed import TestBed
from testbed.deployment import (
    NODE_STATE_SA,
    OPERATOR_DIR,
    OPERATOR_NAMESPACE,
    OPERATOR_SA,
    load_documents,
    service_account_user,
)
from testbed.waiting import wait_for

GROUP, VERSION = "sriovnetwork.openshift.io", "v1"
DRIVER_GROUP, DRIVER_VERSION = "sriovnetwork.k8snetworkplumbingwg.io", "v1alpha1"
REPO = Path(__file__).resolve().parents[1]


RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


def shipped_rbac(namespace: str, suffix: str, manifest: str = "rbac.yaml") -> list[dict[str, Any]]:
    """The RBAC objects of one deploy/operator/ manifest, moved into `namespace`."""
    out = []
    for shipped in load_documents(OPERATOR_DIR / manifest):
        if shipped["kind"] not in RBAC_KINDS:
            continue
        doc = copy.deepcopy(shipped)
        md = doc["metadata"]
        if md.get("namespace") == OPERATOR_NAMESPACE:
            md["namespace"] = namespace
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            md["name"] = f"{md['name']}-{suffix}"
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
        for subject in doc.get("subjects", []):
            subject["namespace"] = namespace
        out.append(doc)
    return out


Probe = Callable[[Any], object]


def _await_authorized(api: client.ApiClient, authorized: Probe, manifest: str) -> None:
    try:
        objs = client.CustomObjectsApi(api)
        wait_for(
            lambda: authorized(objs),
            30,
            what=f"the shipped {manifest} to take effect",
            ignore=(ApiException,),
        )
    finally:
        api.close()


def _issue(testbed: TestBed, namespace: str, account: str, manifest: str, authorized: Probe) -> str:
    """A client-certificate identity authenticating as ServiceAccount `account` in `namespace`,
    bound only by the RBAC of the shipped `manifest`; returns its name."""
    suffix = secrets.token_hex(3)
    identity = f"{account}-{suffix}"
    user, groups = service_account_user(namespace, account)
    testbed.issue_identity(identity, user, groups)
    testbed.apply(shipped_rbac(namespace, suffix, manifest))
    _await_authorized(testbed.client_for(identity), authorized, manifest)
    return identity


def token_kubeconfig(
    testbed: TestBed, namespace: str, account: str, manifest: str, authorized: Probe, path: Path
) -> Path:
    """Like `_issue`, with a ServiceAccount token written as a kubeconfig at `path`: for namespaces
    whose ServiceAccount user name exceeds a certificate CN's 64 characters (the installed
    `sriov-network-operator` one does)."""
    testbed.apply(shipped_rbac(namespace, secrets.token_hex(3), manifest))
    core = client.CoreV1Api(testbed.api_client)
    request = client.AuthenticationV1TokenRequest.model_validate({"spec": {"expirationSeconds": 3600}})
    answer = wait_for(
        lambda: core.create_namespaced_service_account_token(account, namespace, request),
        30,
        what=f"a token for ServiceAccount {namespace}/{account}",
        ignore=(ApiException,),
    )
    config = json.loads(testbed.kubeconfig_for("admin").read_text())
    for user in config["users"]:
        user["user"] = {"token": present(answer.status, "status of the TokenRequest").token}
    path.write_text(json.dumps(config))
    _await_authorized(kube_config.new_client_from_config(config_file=str(path)), authorized, manifest)
    return path


def operator_probe(namespace: str) -> Probe:
    return lambda objs: (
        objs.list_namespaced_custom_object(DRIVER_GROUP, DRIVER_VERSION, namespace, "deviceattributes")
        and objs.list_cluster_custom_object(GROUP, VERSION, "sriovnetworks")
    )


def node_state_probe(namespace: str) -> Probe:
    def may_read(objs: Any) -> bool:
        try:
            objs.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "sriovnetworknodestates", "rbac-probe"
            )
        except ApiException as exc:
            if exc.status != 404:  # 403 until the RoleBinding takes effect
                raise
        return True

    return may_read


def issue_operator_identity(testbed: TestBed, namespace: str) -> str:
    """The operator's identity, bound only by the shipped rbac.yaml."""
    return _issue(testbed, namespace, OPERATOR_SA, "rbac.yaml", operator_probe(namespace))


def issue_node_state_identity(testbed: TestBed, namespace: str) -> str:
    """The node-state reporter's identity, bound only by the shipped node-state.yaml."""
    return _issue(testbed, namespace, NODE_STATE_SA, "node-state.yaml", node_state_probe(namespace))


class Operator(processes.LoggedChild):
    """One sriov-operator process."""

    def __init__(self, kubeconfig: Path, namespace: str, log: Path, *args: str) -> None:
        super().__init__(log)
        self.cmd = [
            str(Path(sys.executable).parent / "sriov-operator"),
            "--namespace", namespace,
            "--kubeconfig", str(kubeconfig),
            "--resync-seconds", "3600",
            *args,
        ]  # fmt: skip

    def start(self) -> None:
        self.spawn(self.cmd, os.environ, REPO)


@contextmanager
def running(kubeconfig: Path, namespace: str, log: Path, *args: str) -> Iterator[Operator]:
    op = Operator(kubeconfig, namespace, log, *args)
    op.start()
    try:
        yield op
    finally:
        op.stop()
