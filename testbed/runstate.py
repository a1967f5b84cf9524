"""The on-disk record of one bed run, and how to tell a live run from a crashed one.

Every run owns ``<root>/<run_id>/`` and writes ``state.json`` there before it starts anything, so a
run that crashes half-way is still found and cleaned by the next one. While a bed starts, the
starting process is its owner; a pytest session stays the owner for the whole session, while a
detached bed (``scripts/testbed up``) drops its owner once ready and counts as stale only when one
of its processes died.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.processes import ProcessRecord, is_running, start_ticks, stop

STATE_FILE = "state.json"


def default_root() -> Path:
    return Path(os.environ.get("AUTO_SRIOV_TESTBED_ROOT", "/tmp/auto-sriov-testbed"))


def shm_root() -> Path:
    """etcd data goes to RAM when /dev/shm exists: fsync-free and nothing left on disk."""
    shm = Path("/dev/shm")
    return shm / "auto-sriov-testbed" if shm.is_dir() else default_root() / "etcd-data"


@dataclass
class BedState:
    run_id: str
    run_dir: Path
    etcd_data_dir: Path
    owner_pid: int | None
    owner_ticks: int | None
    node_name: str
    server: str = ""
    node_uid: str = ""
    ports: dict[str, int] = field(default_factory=dict)
    kubeconfigs: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    processes: list[ProcessRecord] = field(default_factory=list)
    ready: bool = False
    stopped: bool = False

    @property
    def path(self) -> Path:
        return self.run_dir / STATE_FILE

    @property
    def log_dir(self) -> Path:
        return self.run_dir / "logs"

    @property
    def pki_dir(self) -> Path:
        return self.run_dir / "pki"

    @property
    def ca_file(self) -> Path:
        return self.pki_dir / "ca.crt"

    @property
    def audit_log(self) -> Path:
        return self.log_dir / "audit.log"

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_dir": str(self.run_dir),
            "etcd_data_dir": str(self.etcd_data_dir),
            "owner_pid": self.owner_pid,
            "owner_ticks": self.owner_ticks,
            "node_name": self.node_name,
            "server": self.server,
            "node_uid": self.node_uid,
            "ports": self.ports,
            "kubeconfigs": self.kubeconfigs,
            "versions": self.versions,
            "timings": self.timings,
            "processes": [p.to_json() for p in self.processes],
            "ready": self.ready,
            "stopped": self.stopped,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BedState:
        return cls(
            run_id=str(data["run_id"]),
            run_dir=Path(data["run_dir"]),
            etcd_data_dir=Path(data["etcd_data_dir"]),
            owner_pid=data.get("owner_pid"),
            owner_ticks=data.get("owner_ticks"),
            node_name=str(data["node_name"]),
            server=str(data.get("server", "")),
            node_uid=str(data.get("node_uid", "")),
            ports={k: int(v) for k, v in data.get("ports", {}).items()},
            kubeconfigs={k: str(v) for k, v in data.get("kubeconfigs", {}).items()},
            versions={k: str(v) for k, v in data.get("versions", {}).items()},
            timings={k: float(v) for k, v in data.get("timings", {}).items()},
            processes=[ProcessRecord.from_json(p) for p in data.get("processes", [])],
            ready=bool(data.get("ready", False)),
            stopped=bool(data.get("stopped", False)),
        )

    def save(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        tmp.replace(self.path)


def new_state(root: Path, run_id: str, node_name: str) -> BedState:
    pid = os.getpid()
    return BedState(
        run_id=run_id,
        run_dir=root / run_id,
        # Unique even for equal run ids: beds under different roots (e.g. two "cli" beds) coexist.
        etcd_data_dir=shm_root() / f"{run_id}-{secrets.token_hex(4)}",
        owner_pid=pid,
        owner_ticks=start_ticks(pid),
        node_name=node_name,
    )


def load(path: Path) -> BedState:
    return BedState.from_json(json.loads(path.read_text()))


def owner_alive(state: BedState) -> bool:
    return (
        state.owner_pid is not None
        and state.owner_ticks is not None
        and is_running(state.owner_pid, state.owner_ticks)
    )


def processes_alive(state: BedState) -> bool:
    return all(is_running(p.pid, p.start_ticks) for p in state.processes)


def is_stale(state: BedState) -> bool:
    """True for a run nobody will ever stop: its owner died, or a detached bed lost a process."""
    if state.stopped:
        return False
    if state.owner_pid is not None:
        return not owner_alive(state)
    return not processes_alive(state)


def dispose(state: BedState, *, keep_logs: bool) -> None:
    """Stop the run's processes; delete its files unless the logs are wanted."""
    stop(list(reversed(state.processes)))
    shutil.rmtree(state.etcd_data_dir, ignore_errors=True)
    if keep_logs:
        state.stopped = True
        state.owner_pid = state.owner_ticks = None
        state.save()
    else:
        shutil.rmtree(state.run_dir, ignore_errors=True)


def runs(root: Path) -> list[BedState]:
    found = []
    for path in sorted(root.glob(f"*/{STATE_FILE}")):
        with contextlib.suppress(OSError, ValueError, KeyError):
            found.append(load(path))
    return found


def cleanup_stale(root: Path) -> list[str]:
    """Dispose of every stale run under ``root``; returns their run ids."""
    cleaned = []
    for state in runs(root):
        if is_stale(state):
            dispose(state, keep_logs=False)
            cleaned.append(state.run_id)
    return cleaned
