"""On-disk state shared with sriov-cni's layout: NetConf cache, PCI allocations and device locks.

- ``<dataDir>/<containerID>-<ifname>``: the NetConf plus original VF state, read by DEL;
- ``<dataDir>/pci/<BDF>``: the netns path the VF was given to (allocation marker);
- ``<dataDir>/pci/vf_lock/<BDF>.lock``: flock serialising ADD/DEL per device.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from plugins import skel

LOCK_TIMEOUT_SECONDS = 60.0


@contextlib.contextmanager
def device_lock(data_dir: str, bdf: str) -> Iterator[None]:
    lock_dir = Path(data_dir) / "pci/vf_lock"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{bdf}.lock", "a", encoding="utf-8") as fh:
        deadline = time.monotonic() + LOCK_TIMEOUT_SECONDS
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise skel.CniError(
                        skel.TRY_AGAIN_LATER, f"timed out waiting for the lock of VF {bdf}"
                    ) from None
                time.sleep(0.05)
        yield


def cache_path(data_dir: str, container_id: str, ifname: str) -> Path:
    return Path(data_dir) / f"{container_id}-{ifname}"


def save_cache(data_dir: str, container_id: str, ifname: str, doc: Mapping[str, Any]) -> None:
    Path(data_dir).mkdir(mode=0o700, parents=True, exist_ok=True)
    path = cache_path(data_dir, container_id, ifname)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    tmp.replace(path)


def load_cache(data_dir: str, container_id: str, ifname: str) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = json.loads(cache_path(data_dir, container_id, ifname).read_text())
    except (OSError, ValueError):
        return None
    return doc


def drop_cache(data_dir: str, container_id: str, ifname: str) -> None:
    cache_path(data_dir, container_id, ifname).unlink(missing_ok=True)


def _allocation_path(data_dir: str, bdf: str) -> Path:
    return Path(data_dir) / "pci" / bdf


def check_allocation(data_dir: str, bdf: str) -> None:
    """Refuse a VF whose recorded netns still exists; forget allocations to vanished netns."""
    path = _allocation_path(data_dir, bdf)
    try:
        netns = path.read_text().strip()
    except FileNotFoundError:
        return
    if netns and os.path.exists(netns):
        raise skel.CniError(skel.INTERNAL, f"pci address {bdf} is already allocated")
    path.unlink(missing_ok=True)


def save_allocation(data_dir: str, bdf: str, netns: str) -> None:
    path = _allocation_path(data_dir, bdf)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(netns)


def drop_allocation(data_dir: str, bdf: str) -> None:
    _allocation_path(data_dir, bdf).unlink(missing_ok=True)
