"""A ServiceAccount token bound to a Pod on the bed's node, as a DaemonSet Pod's projected token is.

The API server honours the `associated-node:` verbs (the driver's ResourceClaim status.devices
writes, KEP-4817) only for such a token: the bed's client-certificate identities carry no node.
The Pod object only anchors the token to the node. It is host-network like the driver's DaemonSet
Pod (deploy/base/driver-daemonset.yaml): the simulated kubelet makes no sandbox network for it, and the
real kubelet runs it on a local image.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed.apiobjects import present, uid_of
from testbed.bed import TestBed

TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class BoundToken:
    kubeconfig: Path
    namespace: str
    pod: str

    def revoke(self, bed: TestBed) -> None:
        """Deleting the anchor Pod invalidates the token."""
        with contextlib.suppress(ApiException):
            client.CoreV1Api(bed.api_client).delete_namespaced_pod(
                self.pod, self.namespace, grace_period_seconds=0
            )


def node_bound_kubeconfig(
    bed: TestBed,
    namespace: str,
    service_account: str,
    path: Path,
    *,
    image: str | None = None,
    node_name: str | None = None,
) -> BoundToken:
    """Write to `path` a kubeconfig that authenticates as `namespace/service_account` from a Pod on
    the bed's node (or ``node_name``). The ServiceAccount must exist. With a real kubelet on the node, `image` (a
    local one) lets it run the Pod; host network, so no CNI call is made for it."""
    core = client.CoreV1Api(bed.api_client)
    name = f"{service_account}-{secrets.token_hex(3)}"
    pod = core.create_namespaced_pod(
        namespace,
        client.V1Pod.model_validate(
            {
                "metadata": {"name": name},
                "spec": {
                    "nodeName": node_name or bed.node_name,
                    "serviceAccountName": service_account,
                    "automountServiceAccountToken": False,
                    "hostNetwork": True,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "c",
                            "image": image or "registry.invalid/none:0",
                            "imagePullPolicy": "Never",
                            "command": ["sleep", "infinity"],
                        }
                    ],
                },
            }
        ),
    )
    request = client.AuthenticationV1TokenRequest.model_validate(
        {
            "spec": {
                "expirationSeconds": TOKEN_SECONDS,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid_of(pod)},
            }
        }
    )
    answer = core.create_namespaced_service_account_token(service_account, namespace, request)
    token = present(answer.status, "status of the TokenRequest").token
    config = json.loads(bed.kubeconfig_for("admin").read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(json.dumps(config))
    return BoundToken(path, namespace, name)
