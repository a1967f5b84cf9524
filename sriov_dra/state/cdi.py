"""CDI spec files that hand each prepared VF's environment and device nodes to the runtime.

One spec per claim (a device per prepared VF) and one per Pod (the Pod-global device listing all
VF PCI addresses of the Pod's prepared claims). Files are JSON, which every CDI reader accepts,
and are replaced atomically so the runtime never reads half a spec.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sriov_dra.core.cdinames import CLASS, KIND, VENDOR, claim_device_id, env_name, pod_device_id
from sriov_dra.state.checkpoint import FileStorage

__all__ = [
    "CLASS",
    "KIND",
    "VENDOR",
    "CdiDir",
    "claim_device_id",
    "claim_spec",
    "env_name",
    "pod_device_id",
    "pod_spec",
    "rehome",
]


def _cdi_version(devices: Sequence[Mapping[str, Any]]) -> str:
    # CDI 0.5.0 is the first version allowing names that start with a digit and device hostPath.
    needs_05 = any(
        d["name"][:1].isdigit() or any("hostPath" in n for n in d["containerEdits"].get("deviceNodes", []))
        for d in devices
    )
    return "0.5.0" if needs_05 else "0.3.0"


def _spec(devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cdiVersion": _cdi_version(devices), "kind": KIND, "devices": devices}


def _edits(env: Mapping[str, str], device_nodes: Sequence[str]) -> dict[str, Any]:
    edits: dict[str, Any] = {"env": [f"{k}={v}" for k, v in sorted(env.items())]}
    if device_nodes:
        edits["deviceNodes"] = [{"path": p, "hostPath": p, "type": "c"} for p in device_nodes]
    return edits


def claim_spec(
    claim_uid: str, devices: Sequence[tuple[str, Mapping[str, str], Sequence[str]]]
) -> dict[str, Any]:
    """Spec for one claim: (device name, env, device node paths) per prepared VF."""
    return _spec(
        [
            {"name": f"{claim_uid}-{name}", "containerEdits": _edits(env, nodes)}
            for name, env, nodes in devices
        ]
    )


def pod_spec(pod_uid: str, pci_addresses: Sequence[str]) -> dict[str, Any]:
    """The Pod-global device: every VF PCI address of the Pod's prepared claims."""
    env = {"SRIOVNETWORK_PCI_ADDRESSES": ",".join(pci_addresses)}
    return _spec([{"name": pod_uid, "containerEdits": _edits(env, ())}])


def rehome(spec: Mapping[str, Any], dev_root: Path) -> dict[str, Any]:
    """The spec with every device node's hostPath under `dev_root` instead of ``/dev``; the
    container path stays. A node keeps /dev; the test bed's fake node keeps its nodes elsewhere."""
    out: dict[str, Any] = json.loads(json.dumps(spec))
    for device in out.get("devices", []):
        for node in device["containerEdits"].get("deviceNodes", []):
            rel = Path(node["hostPath"]).relative_to("/dev")
            node["hostPath"] = str(dev_root / rel)
    return out


class CdiDir:
    """The CDI spec directory (``/var/run/cdi`` on a node)."""

    def __init__(self, root: Path, *, dev_root: Path = Path("/dev")) -> None:
        self.root = root
        self.dev_root = dev_root

    def path(self, uid: str) -> Path:
        return self.root / f"{VENDOR}-{CLASS}_{uid}.json"

    def exists(self, uid: str) -> bool:
        return self.path(uid).is_file()

    def write(self, uid: str, spec: Mapping[str, Any]) -> None:
        if self.dev_root != Path("/dev"):
            spec = rehome(spec, self.dev_root)
        FileStorage(self.path(uid)).write(json.dumps(spec, indent=2, sort_keys=True).encode() + b"\n")

    def remove(self, uid: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(uid).unlink()
