"""Durable record of prepared claims: what each claim holds, so restarts and unprepare never guess.

The file is the node agent's memory across restarts. It is written atomically (temp file, fsync,
rename, directory fsync), carries a checksum over its canonical payload and a top-level format
version, and is keyed by claim UID so a claim UID can only ever have one record. A file that is
corrupt or of an unknown version is refused loudly and left untouched: deleting it would lose the
only record of which VF drivers and CDI specs must be restored.

Each prepared device may carry an optional, versioned managed-binding record; this module only
guards its version so a later binding format can be added without changing the file version.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from sriov_contract.durable import atomic_write
from sriov_contract.errors import ReasonedError

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


class CheckpointStorage(Protocol):
    """Where the serialized checkpoint lives; the file adapter in production, a fake in tests."""

    def read(self) -> bytes | None: ...

    def write(self, data: bytes) -> None: ...


class FileStorage:
    """Atomic checkpoint file: readers see either the old or the new complete content."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def write(self, data: bytes) -> None:
        atomic_write(self.path, data)


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
        "config": copy.deepcopy(dict(d.config)),
        "ifName": d.if_name,
        "env": dict(d.env),
        "deviceNodes": list(d.device_nodes),
    }
    if d.managed_binding is not None:
        out["managedBinding"] = copy.deepcopy(dict(d.managed_binding))
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
    data = {"claims": {uid: _claim_to_json(r) for uid, r in records.items()}}
    checksum = hashlib.sha256(_canonical(data)).hexdigest()
    return _canonical({"version": CHECKPOINT_VERSION, "checksum": checksum, "data": data}) + b"\n"


def _corrupt(path: str, why: str) -> CheckpointError:
    return CheckpointError(
        "CorruptCheckpoint",
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
                "UnknownManagedBindingVersion",
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
            "UnknownCheckpointVersion",
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


def _frozen_copy(record: ClaimRecord) -> ClaimRecord:
    """A deep copy, so no caller can change stored state through a returned or supplied object."""
    return replace(
        record,
        devices=tuple(
            replace(
                d,
                config=copy.deepcopy(dict(d.config)),
                env=dict(d.env),
                managed_binding=None if d.managed_binding is None else copy.deepcopy(dict(d.managed_binding)),
            )
            for d in record.devices
        ),
    )


class PreparedClaims:
    """The in-memory checkpoint. Every mutation is narrow, runs under one lock, is persisted before
    it returns, and is rolled back in memory if persisting fails."""

    def __init__(self, storage: CheckpointStorage, path: str = "<checkpoint>") -> None:
        self._storage = storage
        self._lock = threading.Lock()
        raw = storage.read()
        self._records: dict[str, ClaimRecord] = {} if raw is None else decode(raw, path)

    def snapshot_claim(self, claim_uid: str) -> ClaimRecord | None:
        with self._lock:
            record = self._records.get(claim_uid)
            return None if record is None else _frozen_copy(record)

    def snapshot_pod(self, pod_uid: str) -> list[ClaimRecord]:
        with self._lock:
            return [_frozen_copy(r) for r in self._records.values() if r.pod_uid == pod_uid]

    def snapshot_all(self) -> list[ClaimRecord]:
        with self._lock:
            return [_frozen_copy(r) for r in self._records.values()]

    def add_claim(self, record: ClaimRecord) -> None:
        """Record a newly prepared claim; a claim UID that already has a record is refused."""

        def mutate(records: dict[str, ClaimRecord]) -> None:
            existing = records.get(record.claim_uid)
            if existing is not None:
                raise CheckpointError(
                    "ClaimReleaseInProgress",
                    f"claim {record.namespace}/{record.name} ({record.claim_uid}) is still recorded as "
                    f"prepared for Pod {existing.pod_uid}; it must be unprepared before Pod "
                    f"{record.pod_uid} can use it",
                    claim_uid=record.claim_uid,
                )
            records[record.claim_uid] = _frozen_copy(record)

        self._mutate(mutate)

    def remove_claim(self, claim_uid: str) -> ClaimRecord | None:
        """Forget a claim; returns what was removed (None when it was not recorded)."""
        removed: list[ClaimRecord] = []

        def mutate(records: dict[str, ClaimRecord]) -> None:
            if claim_uid in records:
                removed.append(records.pop(claim_uid))

        self._mutate(mutate, persist_if=lambda: bool(removed))
        return removed[0] if removed else None

    def update_managed_bindings(self, claim_uid: str, bindings: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace the managed-binding record of the named devices (keyed by device name)."""

        def mutate(records: dict[str, ClaimRecord]) -> None:
            record = records.get(claim_uid)
            if record is None:
                raise CheckpointError(
                    "ClaimNotPrepared", f"claim {claim_uid} has no checkpoint record to update"
                )
            unknown = set(bindings) - {d.device for d in record.devices}
            if unknown:
                raise CheckpointError(
                    "DeviceNotInClaim",
                    f"claim {claim_uid} does not hold device(s) {sorted(unknown)}",
                )
            devices = tuple(
                replace(d, managed_binding=copy.deepcopy(dict(bindings[d.device])))
                if d.device in bindings
                else d
                for d in record.devices
            )
            records[claim_uid] = replace(record, devices=devices)

        self._mutate(mutate)

    def set_managed_phase(self, claim_uid: str, phase: str, *, keep: frozenset[str] = frozenset()) -> bool:
        """Move every managed binding of the claim to `phase`, except those already in a `keep` phase.

        Returns whether anything changed; nothing is written when nothing changes.
        """
        changed: list[bool] = []

        def mutate(records: dict[str, ClaimRecord]) -> None:
            record = records.get(claim_uid)
            if record is None:
                raise CheckpointError(
                    "ClaimNotPrepared", f"claim {claim_uid} has no checkpoint record to update"
                )
            devices = []
            for device in record.devices:
                binding = device.managed_binding
                if binding is not None and binding.get("phase") not in keep | {phase}:
                    binding = {**copy.deepcopy(dict(binding)), "phase": phase}
                    changed.append(True)
                devices.append(replace(device, managed_binding=binding))
            records[claim_uid] = replace(record, devices=tuple(devices))

        self._mutate(mutate, persist_if=lambda: bool(changed))
        return bool(changed)

    def _mutate(
        self,
        mutate: Callable[[dict[str, ClaimRecord]], None],
        persist_if: Callable[[], bool] = lambda: True,
    ) -> None:
        with self._lock:
            before = dict(self._records)
            mutate(self._records)
            if not persist_if():
                return
            try:
                self._storage.write(encode(self._records))
            except OSError as exc:
                self._records = before
                raise CheckpointError(
                    "CheckpointWriteFailed",
                    f"could not persist the checkpoint ({exc}); the change was not applied. Check the "
                    "plugin directory's disk space and permissions",
                ) from exc
            except BaseException:
                self._records = before
                raise
