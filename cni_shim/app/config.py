"""The daemon's configuration: daemon-config.json (the keys it lays over every request's config) and
the few settings the daemon itself takes from it and its environment."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cni_shim import reasons
from sriov_contract.errors import ReasonedError

DEFAULT_SOCKET_DIR = "/run/cni-shim/"


@dataclass(frozen=True)
class DaemonConfig:
    raw: dict[str, Any]
    socket_dir: str
    kubeconfig: str
    chroot_dir: str
    metrics_address: str
    node_name: str
    # host:port of kubelet's /healthz and /readyz (cni_shim.thick.health); "" serves none.
    health_address: str = ""


def load_config(
    path: str, env: dict[str, str], metrics_address: str = "", health_address: str = ""
) -> DaemonConfig:
    try:
        with open(path, "rb") as fh:
            raw = json.load(fh)
    except OSError as exc:
        raise ReasonedError(
            reasons.DAEMON_CONFIG_UNREADABLE, f"cannot read {path}: {exc.strerror}; mount it"
        ) from exc
    except ValueError as exc:
        raise ReasonedError(
            reasons.DAEMON_CONFIG_MALFORMED, f"{path} is not JSON: {exc}; fix the ConfigMap"
        ) from exc
    if not isinstance(raw, dict):
        raise ReasonedError(reasons.DAEMON_CONFIG_MALFORMED, f"{path} must hold a JSON object")
    port = raw.get("metricsPort")
    address = metrics_address or str(raw.get("metricsAddress") or "")
    if not address and isinstance(port, int) and not isinstance(port, bool) and port > 0:
        address = f":{port}"
    return DaemonConfig(
        raw=raw,
        socket_dir=str(raw.get("socketDir") or DEFAULT_SOCKET_DIR),
        kubeconfig=str(raw.get("kubeconfig") or ""),
        chroot_dir=str(raw.get("chrootDir") or ""),
        metrics_address=address,
        node_name=env.get("NODE_NAME") or env.get("MULTUS_NODE_NAME", ""),
        health_address=health_address,
    )
