"""sriov-operator under exactly its shipped RBAC (deploy/operator/rbac.yaml), as a subprocess.

Each test gets its own operator namespace: the shipped manifests are applied with only the
namespace (and the cluster-scoped names, which must not collide between tests) substituted, so
what the apiserver authorizes is what an installation grants. The operator runs with a long
resync so that a missing watch cannot be hidden by periodic passes.
"""

from __future__ import annotations

import copy
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.bed import processes
from tests.bed.bed import TestBed
from tests.bed.waiting import wait_for
from tests.support.deploy import (
    OPERATOR_DIR,
    OPERATOR_NAMESPACE,
    OPERATOR_SA,
    load_documents,
    service_account_user,
)

GROUP, VERSION = "sriovnetwork.openshift.io", "v1"
DRIVER_GROUP, DRIVER_VERSION = "sriovnetwork.k8snetworkplumbingwg.io", "v1alpha1"
REPO = Path(__file__).resolve().parents[2]


def shipped_rbac(namespace: str, suffix: str) -> list[dict[str, Any]]:
    out = []
    for shipped in load_documents(OPERATOR_DIR / "rbac.yaml"):
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


def issue_operator_identity(testbed: TestBed, namespace: str) -> str:
    """An identity authenticating as the operator's ServiceAccount in `namespace`, bound only by
    the shipped rbac.yaml; returns its name."""
    suffix = secrets.token_hex(3)
    identity = f"sriov-operator-{suffix}"
    user, groups = service_account_user(namespace, OPERATOR_SA)
    testbed.issue_identity(identity, user, groups)
    testbed.apply(shipped_rbac(namespace, suffix))
    api = testbed.client_for(identity)
    try:
        wait_for(
            lambda: (
                client.CustomObjectsApi(api).list_namespaced_custom_object(
                    DRIVER_GROUP, DRIVER_VERSION, namespace, "deviceattributes"
                )
                and client.CustomObjectsApi(api).list_cluster_custom_object(GROUP, VERSION, "sriovnetworks")
            ),
            30,
            what="the shipped operator RBAC to take effect",
            ignore=(ApiException,),
        )
    finally:
        api.close()
    return identity


class Operator:
    """One sriov-operator process."""

    def __init__(self, kubeconfig: Path, namespace: str, log: Path, *args: str) -> None:
        self.cmd = [
            str(Path(sys.executable).parent / "sriov-operator"),
            "--namespace", namespace,
            "--kubeconfig", str(kubeconfig),
            "--resync-seconds", "3600",
            *args,
        ]  # fmt: skip
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=dict(os.environ)
            )

    def stop(self) -> None:
        if self.proc is not None:
            processes.terminate(self.proc, 15)
        self.proc = None

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def running(kubeconfig: Path, namespace: str, log: Path, *args: str) -> Iterator[Operator]:
    op = Operator(kubeconfig, namespace, log, *args)
    op.start()
    try:
        yield op
    finally:
        op.stop()
