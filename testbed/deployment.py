"""The shipped installation as the bed applies it: where deploy/base/, deploy/operator/ and the documented examples are,
the namespaces and ServiceAccounts the manifests name, and the user the API server authenticates
a ServiceAccount as."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY_DIR = REPO_ROOT / "deploy"
# The driver-only install (`kubectl apply -k deploy/base/`) and the overlay that adds the operator
# to it; siblings, because kustomize refuses an overlay whose base directory contains it.
BASE_DIR = DEPLOY_DIR / "base"
OPERATOR_DIR = DEPLOY_DIR / "operator"
EXAMPLES_DIR = REPO_ROOT / "docs" / "examples"
DRIVER_NAMESPACE = "dra-driver-sriov"
DRIVER_SA = "sriov-dra-driver"
CNI_NAMESPACE = "cni-shim"
CNI_SA = "cni-shim"
OPERATOR_NAMESPACE = "sriov-network-operator"
OPERATOR_SA = "sriov-network-operator"
NODE_STATE_SA = "sriov-network-config-daemon"


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def service_account_user(namespace: str, name: str) -> tuple[str, list[str]]:
    """The user name and groups the apiserver authenticates a ServiceAccount token as."""
    return (
        f"system:serviceaccount:{namespace}:{name}",
        ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
    )
