"""Identities on the bed and the kubeconfig file each one uses.

Kubeconfigs are written as JSON with file paths (never ``*-data``), so both the official client
and a stdlib-only reader such as the CNI shim's can load them without YAML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLUSTER_NAME = "auto-sriov-testbed"


@dataclass(frozen=True)
class Identity:
    """A client-cert user: ``name`` is how tests refer to it, ``user`` what the apiserver sees."""

    name: str
    user: str
    groups: tuple[str, ...] = ()


MASTERS = ("system:masters",)
# The control-plane components get system:masters so RBAC stays fully enforced for the identities
# under test without granting every controller role by hand.
IDENTITIES: tuple[Identity, ...] = (
    Identity("admin", "admin", MASTERS),
    Identity("driver", "sriov-dra-driver"),
    Identity("cni", "cni-shim"),
    Identity("kube-controller-manager", "system:kube-controller-manager", MASTERS),
    Identity("kube-scheduler", "system:kube-scheduler", MASTERS),
)


def render(server: str, ca_file: Path, identity: str, cert: Path, key: Path) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": CLUSTER_NAME, "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": identity, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": identity, "context": {"cluster": CLUSTER_NAME, "user": identity}}],
        "current-context": identity,
    }


def write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path
