"""Watches the node's VFs and tells everyone who cares when one's health changes.

A poll every POLL_SECONDS (sysfs reads, see sriov_dra.sysfs.linkstate) is judged by the pure
core; a change updates the device state (the slice publisher adds or removes the taint), wakes the
kubelet's resource-health stream, and is told to an administrator (log, metrics, Node Event).
Polling rather than netlink: the fake node's PF link state lives in files, a poll costs a few
reads, and one second keeps link-down -> taint far inside the 10 s target.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from sriov_dra.advertise.inventory import DeviceState
from sriov_dra.core.devicehealth import Observation, Verdict, changed, judge_all
from sriov_dra.kubeletplugin.api import DeviceHealthReport

log = logging.getLogger(__name__)

POLL_SECONDS: Final = 1.0


class DeviceHealthMonitor:
    """The current verdict of every discovered VF; implements the kubeletplugin's DeviceHealthFeed."""

    def __init__(
        self,
        observe: Callable[[], Mapping[str, Observation]],
        state: DeviceState,
        *,
        pool: str,
        republish: Callable[[], None],
        tell: Callable[[str, Verdict], None],
        interval: float = POLL_SECONDS,
    ) -> None:
        self._observe = observe
        self._state = state
        self._pool = pool
        self._republish = republish
        self._tell = tell
        self._interval = interval
        self._changed = threading.Condition()
        self._verdicts: dict[str, Verdict] = {}
        self._version = 0

    def check(self) -> dict[str, Verdict]:
        """One observation; returns the devices whose verdict changed."""
        verdicts = judge_all(self._observe())
        with self._changed:
            changes = changed(self._verdicts, verdicts)
            self._verdicts = verdicts
            if changes:
                self._version += 1
                self._changed.notify_all()
        if changes:
            if self._state.update_health(verdicts):
                self._republish()
            for name, verdict in sorted(changes.items()):
                self._tell(name, verdict)
        return changes

    def unhealthy(self) -> int:
        with self._changed:
            return sum(not v.healthy for v in self._verdicts.values())

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self._interval):
            try:
                self.check()
            except Exception:
                log.exception("device health check failed; next try in %.0f s", self._interval)

    def reports(self, after: int, timeout: float) -> tuple[int, Sequence[DeviceHealthReport]]:
        with self._changed:
            self._changed.wait_for(lambda: self._version != after, timeout)
            return self._version, [
                DeviceHealthReport(self._pool, name, verdict.healthy, verdict.message)
                for name, verdict in sorted(self._verdicts.items())
            ]
