"""The driver's wait for kubelet's registration: it serves its registration socket anew until
kubelet registers it, and gives up only when the driver stops."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from sriov_dra.app.wiring import report_registration


class _Registration:
    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.waits: list[float] = []

    def wait_registered(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return self.answers.pop(0)


class _Plugin:
    def __init__(self, answers: list[bool]) -> None:
        self.registration = _Registration(answers)
        self.reannounced = 0

    def reannounce(self) -> None:
        self.reannounced += 1


def test_an_unregistered_plugin_is_announced_anew_until_kubelet_registers_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plugin: Any = _Plugin([False, False, True])
    with caplog.at_level(logging.INFO):
        report_registration(plugin, Path("/registry"), threading.Event(), after=7.0)
    assert plugin.reannounced == 2
    assert plugin.registration.waits == [7.0, 7.0, 7.0]
    assert "is /registry kubelet's plugin registry?" in caplog.text
    assert caplog.records[-1].getMessage() == "kubelet registered the plugin"


def test_a_stopping_driver_stops_announcing() -> None:
    plugin: Any = _Plugin([False])
    stop = threading.Event()
    stop.set()
    report_registration(plugin, Path("/registry"), stop, after=1.0)
    assert plugin.reannounced == 0
