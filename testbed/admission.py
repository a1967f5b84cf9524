"""deploy/base/admission/'s ValidatingAdmissionPolicies on the bed, and the identities they judge.

- ``install_policies(bed)`` applies every policy and binding the kustomize install ships and returns
  once the API server enforces them (policies load asynchronously: a forged shadow, dry run, must
  be refused first); ``remove_policies(bed)`` takes them out again and waits until they no longer
  apply, so suites that run the driver under a certificate identity (no node) are unaffected.
- ``impersonating(bed, user)``: an admin client that acts as ``user`` (a tenant in a test).
- ``client_from(kubeconfig)``: a client for a kubeconfig file, e.g. a node-bound token's.
- ``denial(exc)``: the policy, binding and message of an admission denial.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from sriov_contract.keys import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from testbed import access
from testbed.bed import TestBed
from testbed.deployment import BASE_DIR, load_documents
from testbed.waiting import wait_for

ADMISSION_DIR = BASE_DIR / "admission"
POLICY_KINDS = frozenset({"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})
LOAD_TIMEOUT = 30.0
# "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: message" (apiserver's wording).
_DENIAL = re.compile(r"ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)' denied request: (.*)", re.S)


def policy_objects() -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(ADMISSION_DIR.glob("*.yaml"))
        for doc in load_documents(path)
        if doc["kind"] in POLICY_KINDS
    ]


@dataclass(frozen=True)
class Denial:
    policy: str
    binding: str
    message: str

    @property
    def rule(self) -> str:
        """The rule's name, which every message of ours starts with in brackets."""
        found = re.match(r"\[([a-z-]+)\]", self.message)
        return found.group(1) if found else ""


def denial(exc: ApiException) -> Denial | None:
    """The admission policy that refused the request, or None for any other failure."""
    try:
        message = json.loads(exc.body or "{}").get("message", "")
    except ValueError:
        return None
    found = _DENIAL.search(message)
    return Denial(*found.groups()) if found else None


def _forged_shadow_refused(bed: TestBed, namespace: str) -> bool:
    """Whether the API server now refuses a forged shadow (a dry run: nothing is created)."""
    body = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "policy-probe", "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
        "spec": {"config": "{}"},
    }
    try:
        client.CustomObjectsApi(bed.api_client).create_namespaced_custom_object(
            "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions", body, dry_run="All"
        )
    except ApiException as exc:
        found = denial(exc)
        if found is None:
            raise
        return True
    return False


def install_policies(bed: TestBed, probe_namespace: str) -> list[dict[str, Any]]:
    objects = policy_objects()
    bed.apply(objects)
    wait_for(lambda: _forged_shadow_refused(bed, probe_namespace), LOAD_TIMEOUT, what="the policies to apply")
    return objects


def remove_policies(bed: TestBed, probe_namespace: str) -> None:
    access.delete_objects(bed.api_client, policy_objects())
    wait_for(
        lambda: not _forged_shadow_refused(bed, probe_namespace), LOAD_TIMEOUT, what="the policies to go"
    )


def client_from(kubeconfig: Path) -> client.ApiClient:
    api: client.ApiClient = kube_config.new_client_from_config(config_file=str(kubeconfig))
    return api


def impersonating(bed: TestBed, user: str) -> client.ApiClient:
    """An admin client whose every request acts as ``user`` (Kubernetes impersonation; the API
    server adds only system:authenticated as a group)."""
    api = bed.client_for("admin")
    api.set_default_header("Impersonate-User", user)
    return api
