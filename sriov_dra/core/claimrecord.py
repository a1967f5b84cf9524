"""What the checkpoint records for each prepared claim, and its exact versioned, checksummed encoding (pure).

The store that persists it (atomic file writes, locking, roll-back) is sriov_dra.state.checkpoint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sriov_contract.errors import ReasonedError
from sriov_dra import reasons

CHECKPOINT_VERSION = 1


# Versions of the per-device managed-binding record this build understands.
MANAGED_BINDING_VERSIONS = frozenset({1})


class CheckpointError(ReasonedError):
    """The checkpoint cannot be read, verified or changed."""


@dataclass(frozen=True)
class PreparedDevice:
    """One VF handed to a claim, with everything needed to answer kubelet and undo the preparation."""

    request_names: tuple[str, ...]
    pool: str
    device: str
    pci_address: str
    cdi_device_ids: tuple[str, ...]
    original_driver: str = ""
    # The effective VfConfig as plain JSON, so a restart re-applies exactly what was decided.
    config: Mapping[str, Any] = field(default_factory=dict)
    if_name: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    device_nodes: tuple[str, ...] = ()
    managed_binding: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ClaimRecord:
    """A prepared claim and the Pod it was prepared for."""

    claim_uid: str
    namespace: str
    name: str
    pod_uid: str
    devices: tuple[PreparedDevice, ...]


def _canonical(payload: Any) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _device_to_json(d: PreparedDevice) -> dict[str, Any]:
    out: dict[str, Any] = {
        "requestNames": list(d.request_names),
        "pool": d.pool,
        "device": d.device,
        "pciAddress": d.pci_address,
        "cdiDeviceIDs": list(d.cdi_device_ids),
        "originalDriver": d.original_driver,
        # Serialized at once and never kept: no copy needed.
        "config": dict(d.config),
        "ifName": d.if_name,
        "env": dict(d.env),
        "deviceNodes": list(d.device_nodes),
    }
    if d.managed_binding is not None:
        out["managedBinding"] = dict(d.managed_binding)
    return out


def _claim_to_json(r: ClaimRecord) -> dict[str, Any]:
    return {
        "namespace": r.namespace,
        "name": r.name,
        "podUID": r.pod_uid,
        "devices": [_device_to_json(d) for d in r.devices],
    }


def encode(records: Mapping[str, ClaimRecord]) -> bytes:
    """Serialize records to checkpoint bytes (deterministic for equal input)."""
    data = _canonical({"claims": {uid: _claim_to_json(r) for uid, r in records.items()}})
    checksum = hashlib.sha256(data).hexdigest()
    # The canonical form of the whole document, its keys in sorted order, without serializing the
    # payload a second time (every checkpoint write encodes every claim).
    return b'{"checksum":"%s","data":%s,"version":%d}\n' % (checksum.encode(), data, CHECKPOINT_VERSION)


def _corrupt(path: str, why: str) -> CheckpointError:
    return CheckpointError(
        reasons.CORRUPT_CHECKPOINT,
        f"checkpoint {path} is unreadable ({why}); it was left untouched. Inspect or restore it, "
        "or drain the node and remove it after cleaning up the VFs it lists",
        path=path,
    )


def _get(obj: Any, key: str, kind: type | tuple[type, ...], where: str, path: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise _corrupt(path, f"{where}: missing {key!r}")
    value = obj[key]
    # bool is an int subclass; never accept it where a number or string is meant.
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
        raise _corrupt(path, f"{where}: {key!r} has the wrong type")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _strings(values: Any, where: str, path: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _corrupt(path, f"{where}: expected a list of strings")
    return tuple(values)


def _device_from_json(obj: Any, where: str, path: str) -> PreparedDevice:
    env = _get(obj, "env", dict, where, path)
    if not all(isinstance(v, str) for v in env.values()):
        raise _corrupt(path, f"{where}: env values must be strings")
    managed = obj.get("managedBinding")
    if managed is not None:
        version = _get(managed, "version", int, f"{where}.managedBinding", path)
        if version not in MANAGED_BINDING_VERSIONS:
            raise CheckpointError(
                reasons.UNKNOWN_MANAGED_BINDING_VERSION,
                f"checkpoint {path} {where} holds a managed binding of version {version}, which this "
                "driver build does not understand; nothing was deleted. Run the driver build that wrote "
                "it, or drain the node and clean up first",
                path=path,
                version=version,
            )
    return PreparedDevice(
        request_names=_strings(_get(obj, "requestNames", list, where, path), where, path),
        pool=_get(obj, "pool", str, where, path),
        device=_get(obj, "device", str, where, path),
        pci_address=_get(obj, "pciAddress", str, where, path),
        cdi_device_ids=_strings(_get(obj, "cdiDeviceIDs", list, where, path), where, path),
        original_driver=_get(obj, "originalDriver", str, where, path),
        config=_get(obj, "config", dict, where, path),
        if_name=_get(obj, "ifName", str, where, path),
        env=env,
        device_nodes=_strings(_get(obj, "deviceNodes", list, where, path), where, path),
        managed_binding=managed,
    )


def decode(raw: bytes, path: str = "<checkpoint>") -> dict[str, ClaimRecord]:
    """Parse and verify checkpoint bytes; any damage raises CheckpointError, never anything else."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    # ValueError also covers integers longer than Python's int-conversion digit limit.
    except (ValueError, RecursionError) as exc:
        raise _corrupt(path, f"not JSON: {exc.__class__.__name__}") from None
    version = _get(doc, "version", int, "top level", path)
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(
            reasons.UNKNOWN_CHECKPOINT_VERSION,
            f"checkpoint {path} has format version {version}, this driver understands "
            f"{CHECKPOINT_VERSION}; nothing was deleted. Run a driver build that understands it",
            path=path,
            version=version,
        )
    checksum = _get(doc, "checksum", str, "top level", path)
    data = _get(doc, "data", dict, "top level", path)
    if hashlib.sha256(_canonical(data)).hexdigest() != checksum:
        raise _corrupt(path, "checksum mismatch")
    claims = _get(data, "claims", dict, "data", path)
    records: dict[str, ClaimRecord] = {}
    for uid, obj in claims.items():
        where = f"claim {uid}"
        devices = _get(obj, "devices", list, where, path)
        records[uid] = ClaimRecord(
            claim_uid=uid,
            namespace=_get(obj, "namespace", str, where, path),
            name=_get(obj, "name", str, where, path),
            pod_uid=_get(obj, "podUID", str, where, path),
            devices=tuple(_device_from_json(d, f"{where} device {i}", path) for i, d in enumerate(devices)),
        )
    return records
