"""`multusConfigFile: auto` on the node: find the primary CNI config, write 00-multus.conf, keep it current.

What goes into the file is cni_shim.core.autoconf's; this module only touches files. The file is
written atomically (a runtime never reads half of it) with mode 0600, rewritten when the primary
changes (its stat is polled: no inotify in the standard library), and removed when the daemon
stops. A readiness indicator file that disappears removes it too and stops the daemon, as Multus's
config manager does.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable

from cni_shim import reasons
from cni_shim.core import autoconf
from cni_shim.core.autoconf import Settings
from sriov_contract.errors import ReasonedError

POLL_SECONDS = 1.0
READINESS_TIMEOUT = 45.0

Log = Callable[..., None]


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def write_atomically(path: str, data: bytes, mode: int = 0o600) -> None:
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.tmp")  # not *.conf: a runtime never picks it up
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class ConfigWriter:
    def __init__(
        self,
        conf: Settings,
        log: Log,
        *,
        find_tries: int = autoconf.FIND_TRIES,
        interval: float = POLL_SECONDS,
        readiness_timeout: float = READINESS_TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.conf = conf
        self._log = log
        self._tries = find_tries
        self._interval = interval
        self._readiness_timeout = readiness_timeout
        self._sleep = sleep
        self.primary_path = ""
        self._written = ""

    def _wait_readiness(self) -> None:
        path = self.conf.readiness_file
        if not path:
            return
        deadline = time.monotonic() + self._readiness_timeout
        while not os.path.exists(path):
            if time.monotonic() >= deadline:
                raise ReasonedError(
                    reasons.DEFAULT_NETWORK_NOT_READY,
                    "have you checked that your default network is ready? still waiting for "
                    f"readinessindicatorfile @ {path}. pollimmediate error: timed out waiting for the condition",
                )
            self._sleep(min(1.0, self._interval))

    def _find_primary(self) -> str:
        master = self.conf.get("multusMasterCNI")
        if master:
            return str(master)
        directory = self.conf.autoconfig_dir
        for _ in range(self._tries):
            try:
                names = os.listdir(directory)
            except OSError as exc:
                raise ReasonedError(
                    reasons.AUTOCONF_FAILED,
                    f"failed to find the primary CNI plugin: error when listing the CNI plugin configurations: {exc}",
                ) from exc
            found = autoconf.primary_name(names)
            if found is not None:
                return found
            self._sleep(1.0)
        raise ReasonedError(
            reasons.AUTOCONF_FAILED,
            "failed to find the primary CNI plugin: failed to find the cluster master CNI plugin: "
            f"could not find a plugin configuration in {directory}",
        )

    def prepare(self) -> None:
        """Before serving: wait for readiness, pick and check the primary (raises: the daemon exits)."""
        self._wait_readiness()
        name = self._find_primary()
        self.primary_path = autoconf.cluster_network(self.conf, name)
        if self.conf.get("forceCNIVersion"):
            data = autoconf.force_version(
                self._load(), str(self.conf.get("cniVersion") or ""), self.primary_path
            )
            write_atomically(self.primary_path, data, 0o644)
        self.render()

    def _load(self) -> bytes:
        try:
            return _read(self.primary_path)
        except OSError as exc:
            raise ReasonedError(
                reasons.AUTOCONF_FAILED,
                f"failed to load the primary CNI configuration as a multus delegate with error "
                f"'failed to access the primary CNI configuration from {self.primary_path}: {exc}'",
            ) from exc

    def render(self) -> str:
        primary = autoconf.load_primary(self._load(), self.primary_path)
        autoconf.check_version(self.conf, primary)
        return autoconf.generate(self.conf, self.primary_path, primary)

    def write(self) -> None:
        text = self.render()
        if text != self._written:
            write_atomically(self.conf.output_path, text.encode())
            self._written = text
            self._log("info", f"wrote {self.conf.output_path}", primary=self.primary_path)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.conf.output_path)

    def watch(
        self, stop: threading.Event, readiness_lost: Callable[[], None], seen: tuple[int, int, int] | None
    ) -> None:
        """Until `stop`: rewrite the file when the primary changes from `seen` (its stamp before the
        last write read it); a vanished readiness file removes it and calls `readiness_lost`. A
        primary that cannot be read keeps the last file."""
        readiness = self.conf.readiness_file
        while not stop.wait(self._interval):
            if readiness and not os.path.exists(readiness):
                self._log(
                    "warning",
                    f"readiness indicator file {readiness} is gone; removing {self.conf.output_path}",
                )
                self.remove()
                readiness_lost()
                return
            now = _stamp(self.primary_path)
            if now == seen or now is None:
                continue
            seen = now
            try:
                self.write()
            except (ReasonedError, OSError) as exc:
                self._log("error", f"failed to regenerate {self.conf.output_path}: {exc}")

    def start(self, stop: threading.Event, readiness_lost: Callable[[], None]) -> threading.Thread:
        # Stamped before the write reads the primary: a change made meanwhile is still seen.
        seen = _stamp(self.primary_path)
        self.write()
        thread = threading.Thread(
            target=self.watch, args=(stop, readiness_lost, seen), name="autoconf", daemon=True
        )
        thread.start()
        return thread
