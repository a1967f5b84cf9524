"""Which checkpoint generation the node agent starts from, what it moves aside, and what it tells the
administrator (pure).

Every checkpoint write keeps the generation it replaces beside it (sriov_dra.state.checkpoint), so
the directory holds the current file, the previous good generation and, after a killed write, an
unfinished temp file. A damaged current file (truncated, bit-flipped, half-written: anything
`decode` refuses as CorruptCheckpoint) is moved aside under a quarantine name, never deleted, and
the agent starts from the previous generation, or empty when that is damaged or missing too; the
bindings the older start lacks are rebuilt from the API (sriov_dra.core.rebuild) and repair
reconciles the rest. A file of an unknown format version is not damage: a newer build wrote it,
and starting without it would forget that build's bindings, so it still stops start-up.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sriov_dra import reasons
from sriov_dra.core.claimrecord import CheckpointError, ClaimRecord, decode

CURRENT: Final = "current"
PREVIOUS: Final = "previous"
EMPTY: Final = "empty"
UNFINISHED_WRITE: Final = "an unfinished write left it behind"
MISSING: Final = "missing while its previous generation exists"


@dataclass(frozen=True)
class Damaged:
    """A checkpoint file the agent will not start from, and why."""

    file: str
    why: str


@dataclass(frozen=True)
class StartingPoint:
    generation: str
    """CURRENT, PREVIOUS or EMPTY: which records the agent starts from."""
    records: dict[str, ClaimRecord]
    damaged: tuple[Damaged, ...] = ()
    """Files to move aside, in the order found."""
    current_missing: bool = False

    @property
    def recovered(self) -> bool:
        """Whether this start departs from the current generation (an event the administrator sees)."""
        return bool(self.damaged) or self.current_missing


def _sound(raw: bytes, path: str) -> dict[str, ClaimRecord] | str:
    """The records, or why the file is damaged; an unknown version is raised, never called damage."""
    try:
        return decode(raw, path)
    except CheckpointError as exc:
        if exc.reason != reasons.CORRUPT_CHECKPOINT:
            raise
        return exc.message


def starting_point(
    current: bytes | None,
    previous: bytes | None,
    *,
    current_path: str,
    previous_path: str,
    leftovers: Sequence[str] = (),
) -> StartingPoint:
    """Decide the generation to start from. `leftovers` are unfinished temp files: never read (a
    write that was not renamed into place was never acknowledged) and always moved aside."""
    damaged = [Damaged(name, UNFINISHED_WRITE) for name in leftovers]
    if current is not None:
        records = _sound(current, current_path)
        if not isinstance(records, str):
            return StartingPoint(CURRENT, records, tuple(damaged))
        damaged.append(Damaged(current_path, records))
    if previous is None:
        return StartingPoint(EMPTY, {}, tuple(damaged))
    records = _sound(previous, previous_path)
    if isinstance(records, str):
        damaged.append(Damaged(previous_path, records))
        return StartingPoint(EMPTY, {}, tuple(damaged), current_missing=current is None)
    return StartingPoint(PREVIOUS, records, tuple(damaged), current_missing=current is None)


def quarantine_name(file: str, stamp: str, taken: Collection[str]) -> str:
    """Where a damaged file is moved: `<file>.damaged-<stamp>`, numbered when that name is taken."""
    name, n = f"{file}.damaged-{stamp}", 1
    while name in taken:
        name, n = f"{file}.damaged-{stamp}-{n}", n + 1
    return name


@dataclass(frozen=True)
class NotRebuilt:
    """A shadow of this node that no record accounts for and that could not be rebuilt."""

    namespace: str
    name: str
    why: str


@dataclass(frozen=True)
class Recovery:
    """One recovered start, as the Warning, the Event and `sriov-dra inspect node` tell it."""

    time: str
    node: str
    start: StartingPoint
    moved: Mapping[str, str]
    """Damaged file -> its quarantine name."""
    rebuilt: tuple[str, ...] = ()
    """Claim UIDs rebuilt from this node's shadows and claims."""
    not_rebuilt: tuple[NotRebuilt, ...] = field(default_factory=tuple)

    def message(self) -> str:
        """What happened and exactly what the administrator does about it."""
        parts = []
        for d in self.start.damaged:
            where = self.moved.get(d.file)
            parts.append(f"{d.file} ({d.why}) was moved to {where}" if where else f"{d.file} ({d.why})")
        if self.start.current_missing:
            parts.append(f"the current checkpoint was {MISSING}")
        told = f"checkpoint damaged: {'; '.join(parts)}. Started from the {self.start.generation} generation"
        told += f" ({len(self.start.records)} claims)"
        if self.rebuilt:
            told += f"; rebuilt {len(self.rebuilt)} claims from this node's shadows and claims"
        if self.not_rebuilt:
            told += (
                f"; {len(self.not_rebuilt)} shadows could not be rebuilt: run `sriov-dra inspect node --node "
                f"{self.node}`, check that no running Pod uses them, then release each with "
                "`sriov-dra orphans --node N --finalize ATTACHMENT-ID`"
            )
        else:
            told += "; nothing else to do: repair reconciles the rest. The moved files are evidence only"
        return told

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": reasons.CHECKPOINT_RECOVERED,
            "time": self.time,
            "generation": self.start.generation,
            "claims": len(self.start.records),
            "quarantined": [
                {"file": d.file, "movedTo": self.moved.get(d.file, ""), "why": d.why}
                for d in self.start.damaged
            ],
            "currentMissing": self.start.current_missing,
            "rebuiltClaims": list(self.rebuilt),
            "notRebuilt": [
                {"namespace": n.namespace, "name": n.name, "why": n.why} for n in self.not_rebuilt
            ],
            "message": self.message(),
        }
