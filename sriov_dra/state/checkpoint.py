"""Durable record of prepared claims: what each claim holds, so restarts and unprepare never guess.

The file is the node agent's memory across restarts. It is written atomically (temp file, fsync,
rename, directory fsync), carries a checksum over its canonical payload and a top-level format
version, and is keyed by claim UID so a claim UID can only ever have one record. Every write keeps
the generation it replaces beside it (`GenerationFiles`): a damaged current file is moved aside,
never deleted, and the agent starts from that previous generation (the decision is
sriov_dra.core.checkpointrecovery's). A file of an unknown version is refused loudly and left
untouched.

Each prepared device may carry an optional, versioned managed-binding record; this module only
guards its version so a later binding format can be added without changing the file version.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from sriov_dra import reasons
from sriov_dra.core.checkpointrecovery import StartingPoint, quarantine_name, starting_point
from sriov_dra.core.claimrecord import (
    CheckpointError,
    ClaimRecord,
    decode,
    encode,
)
from sriov_dra.ports import CheckpointStorage
from sriov_lib.durable import atomic_write, fsync_directory


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


def previous_path(path: Path) -> Path:
    """Where the previous good generation of `path` lives (`checkpoint.json` -> `checkpoint.prev.json`)."""
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def recovery_path(path: Path) -> Path:
    """The record of the last recovered start, read by `sriov-dra inspect node`."""
    return path.with_name(f"{path.stem}.recovery{path.suffix}")


class GenerationFiles:
    """The checkpoint file and, beside it, the generation each write replaced.

    A write first gives the current file a second name as the previous generation (a hard link
    renamed over the old one: no copy, and the current file never disappears), then atomically
    replaces the current file; the replacement's directory fsync makes both names durable. After
    a crash between the two steps both names hold the same good generation.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.previous = previous_path(path)

    def read(self) -> bytes | None:
        return _read(self.path)

    def write(self, data: bytes) -> None:
        link = self.path.with_name(f".{self.previous.name}.link.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        try:
            os.link(self.path, link)
        except FileNotFoundError:
            pass  # the first write, or the first after a recovery: nothing to keep
        except OSError:
            # A filesystem without hard links: keep the generation by copying it.
            kept = _read(self.path)
            if kept is not None:
                atomic_write(self.previous, kept)
        else:
            os.replace(link, self.previous)
        atomic_write(self.path, data)

    def leftovers(self) -> list[Path]:
        """Temp files and links a killed write left (atomic_write's and this class's)."""
        directory = self.path.parent
        names = (f".{self.path.name}.", f".{self.previous.name}.")
        try:
            entries = sorted(os.listdir(directory))
        except FileNotFoundError:
            return []
        return [directory / n for n in entries if n.startswith(names)]

    def decide(self) -> StartingPoint:
        """Where to start, from the files as they are; nothing is moved or written yet."""
        return starting_point(
            self.read(),
            _read(self.previous),
            current_path=str(self.path),
            previous_path=str(self.previous),
            leftovers=[str(p) for p in self.leftovers()],
        )

    def quarantine(self, start: StartingPoint, stamp: str) -> dict[str, str]:
        """Move every damaged file of `start` aside (never deleted); damaged file -> its new path.
        Must run before the first write: a write would keep a damaged current file as previous."""
        if not start.damaged:
            return {}
        directory = self.path.parent
        taken = set(os.listdir(directory))
        moved: dict[str, str] = {}
        for damaged in start.damaged:
            name = quarantine_name(Path(damaged.file).name.lstrip("."), stamp, taken)
            taken.add(name)
            os.replace(damaged.file, directory / name)
            moved[damaged.file] = str(directory / name)
        fsync_directory(directory)
        return moved


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


class RecoveryLog:
    """The last recovered start as JSON (`checkpoint.recovery.json`), for `sriov-dra inspect node`."""

    def __init__(self, checkpoint: Path) -> None:
        self.path = recovery_path(checkpoint)

    def read(self) -> dict[str, Any] | None:
        raw = _read(self.path)
        if raw is None:
            return None
        try:
            doc = json.loads(raw)
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    def write(self, doc: Mapping[str, Any]) -> None:
        atomic_write(self.path, json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n")


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copied(value: Any) -> Any:
    """A deep copy of a JSON-shaped value, the checkpoint's own kind; a few times faster than
    copy.deepcopy (no memo, no reduce protocol), which matters because every repair pass copies
    every claim. Anything else (a subclass included) still goes through copy.deepcopy."""
    kind = type(value)  # exact types: a subclass may carry more than its items
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind is tuple:
        return tuple(_copied(v) for v in value)
    return copy.deepcopy(value)


def _frozen_copy(record: ClaimRecord) -> ClaimRecord:
    """A deep copy, so no caller can change stored state through a returned or supplied object."""
    return replace(
        record,
        devices=tuple(
            replace(
                d,
                config=_copied(dict(d.config)),
                env=dict(d.env),
                managed_binding=None if d.managed_binding is None else _copied(dict(d.managed_binding)),
            )
            for d in record.devices
        ),
    )


class PreparedClaims:
    """The in-memory checkpoint. Every mutation is narrow, runs under one lock, is persisted before
    it returns, and is rolled back in memory if persisting fails."""

    def __init__(
        self,
        storage: CheckpointStorage,
        path: str = "<checkpoint>",
        *,
        records: Mapping[str, ClaimRecord] | None = None,
    ) -> None:
        """Read the storage, or start from `records` already chosen (a recovered start)."""
        self._storage = storage
        self._lock = threading.Lock()
        if records is None:
            raw = storage.read()
            records = {} if raw is None else decode(raw, path)
        self._records: dict[str, ClaimRecord] = {uid: _frozen_copy(r) for uid, r in records.items()}

    def persist(self) -> None:
        """Write what is held now (the first write of a recovered start)."""
        self._mutate(lambda _records: None)

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
                    reasons.CLAIM_RELEASE_IN_PROGRESS,
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
                    reasons.CLAIM_NOT_PREPARED, f"claim {claim_uid} has no checkpoint record to update"
                )
            unknown = set(bindings) - {d.device for d in record.devices}
            if unknown:
                raise CheckpointError(
                    reasons.DEVICE_NOT_IN_CLAIM,
                    f"claim {claim_uid} does not hold device(s) {sorted(unknown)}",
                )
            devices = tuple(
                replace(d, managed_binding=_copied(dict(bindings[d.device]))) if d.device in bindings else d
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
                    reasons.CLAIM_NOT_PREPARED, f"claim {claim_uid} has no checkpoint record to update"
                )
            devices = []
            for device in record.devices:
                binding = device.managed_binding
                if binding is not None and binding.get("phase") not in keep | {phase}:
                    binding = {**_copied(dict(binding)), "phase": phase}
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
                    reasons.CHECKPOINT_WRITE_FAILED,
                    f"could not persist the checkpoint ({exc}); the change was not applied. Check the "
                    "plugin directory's disk space and permissions",
                ) from exc
            except BaseException:
                self._records = before
                raise
