"""The file-backed delegate cache under cniDir: plans at <cniDir>/<containerID>, results under results/.

Every write is atomic (temp file renamed over the target), so a killed shim or daemon leaves
either the old or the new document, never a truncated one, and the runtime's DEL finds it.

The writes are not fsynced. A power cut or kernel crash destroys every network namespace and
interface the cache describes, so what a fsync could save is only the DEL that releases an IPAM
reservation after the reboot; the delegates' own local state (host-local's reservations,
sriov-cni's saved VF state) and libcni's and Multus's caches are written without fsync too,
and a lost or unreadable cache is already handled as cache loss (DEL still succeeds; for a
missing entry the Pod's managed shadows give back their delegates and the cluster network's, and
otherwise that container's reservation leaks: spec section 11's known limit). Meanwhile the eight fsyncs of an
ADD with three delegates (four files, each file and its directory) were the largest piece of
our own time per ADD+DEL, tens of milliseconds on a busy disk, plus a journal commit on every
DEL's unlink of a just-synced file.
"""

from __future__ import annotations

import os

from cni_shim import reasons
from cni_shim.core.protocol import valid_id
from cni_shim.errors import IO_FAILURE, CniError
from sriov_lib import quickjson
from sriov_lib.durable import atomic_write


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CniError(
            reasons.DELEGATE_CACHE_UNREADABLE, f"cannot read {path}: {exc.strerror}", IO_FAILURE
        ) from exc


def _remove(path: str) -> None:
    try:  # noqa: SIM105 - contextlib.suppress would be one more import on every CNI start
        os.unlink(path)
    except FileNotFoundError:
        pass


def _quoted(text: str) -> str:
    return quickjson.dumps(text, ensure_ascii=False)  # Go's %q for the paths a node has


def _os_text(op: str, path: object, exc: OSError) -> str:
    """An OSError as Go's os package words it: `<op> <path>: <lowercase strerror>`."""
    return f"{op} {path}: {(exc.strerror or str(exc)).lower()}"


def _plan_error(why: str) -> CniError:
    return CniError(reasons.DELEGATE_CACHE_WRITE_FAILED, f"saveScratchNetConf: {why}", IO_FAILURE)


class FileCacheStore:
    def __init__(self, cni_dir: str) -> None:
        self.cni_dir = cni_dir
        self.results_dir = os.path.join(cni_dir, "results")

    def _name(self, name: str) -> str:
        if not valid_id(name):
            raise CniError(reasons.INVALID_CACHE_KEY, f"refusing cache file name {name!r}", IO_FAILURE)
        return name

    def _save(self, directory: str, name: str, data: bytes) -> None:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            atomic_write(os.path.join(directory, self._name(name)), data, durable=False)
        except OSError as exc:
            raise CniError(
                reasons.DELEGATE_CACHE_WRITE_FAILED,
                f"cannot save {name} under {directory}: {exc.strerror}; make cniDir writable",
                IO_FAILURE,
            ) from exc

    def save_plan(self, container_id: str, data: bytes) -> None:
        """In Multus's saveScratchNetConf wording, as the error's msg carries it to the runtime."""
        try:
            os.makedirs(self.cni_dir, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise _plan_error(
                f"failed to create the multus data directory({_quoted(self.cni_dir)}): {_os_text('mkdir', exc.filename, exc)}"
            ) from exc
        path = os.path.join(self.cni_dir, self._name(container_id))
        try:
            atomic_write(path, data, durable=False)
        except OSError as exc:
            raise _plan_error(
                f"failed to write container data in the path({_quoted(path)}): {_os_text('open', path, exc)}"
            ) from exc

    def load_plan(self, container_id: str) -> bytes | None:
        return _read(os.path.join(self.cni_dir, self._name(container_id)))

    def remove_plan(self, container_id: str) -> None:
        _remove(os.path.join(self.cni_dir, self._name(container_id)))

    def plan_ids(self) -> list[str]:
        try:
            entries = os.listdir(self.cni_dir)
        except FileNotFoundError:
            return []
        return sorted(
            e
            for e in entries
            if valid_id(e) and e != "results" and os.path.isfile(os.path.join(self.cni_dir, e))
        )

    def save_result(self, key: str, data: bytes) -> None:
        self._save(self.results_dir, key, data)

    def load_result(self, key: str) -> bytes | None:
        return _read(os.path.join(self.results_dir, self._name(key)))

    def remove_result(self, key: str) -> None:
        _remove(os.path.join(self.results_dir, self._name(key)))
