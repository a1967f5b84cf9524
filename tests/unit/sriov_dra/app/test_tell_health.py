"""A VF's health change as an administrator sees it: a Node Event per change, never de-duplicated,
and the two metrics."""

from collections.abc import Mapping
from typing import Any

from prometheus_client import generate_latest

from sriov_dra.app.wiring import tell_health
from sriov_dra.core.devicehealth import HEALTHY, Verdict
from sriov_dra.observe.eventrecorder import EventRecorder, InvolvedObject
from sriov_dra.observe.metrics import DriverMetrics


class Events:
    def __init__(self) -> None:
        self.bodies: list[Mapping[str, Any]] = []

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> None:
        assert namespace == "default"
        self.bodies.append(body)


def test_each_flap_is_an_event_on_the_node_and_counted() -> None:
    events, metrics = Events(), DriverMetrics()
    recorder = EventRecorder(events, host="node-a", remember=0)
    node = InvolvedObject("Node", "v1", "default", "node-a", "uid-n")
    down = Verdict("PFLinkDown", "PFLinkDown: PF ens1f0 of VF 0000-17-00-1 is down")
    unhealthy = [1]
    metrics.watch_unhealthy(lambda: unhealthy[0])
    for verdict in (down, HEALTHY, down):
        tell_health("0000-17-00-1", verdict, metrics, recorder, node)

    assert [(b["type"], b["reason"]) for b in events.bodies] == [
        ("Warning", "PFLinkDown"),
        ("Normal", "DeviceRecovered"),
        ("Warning", "PFLinkDown"),
    ]
    assert events.bodies[0]["message"] == down.message
    assert {b["involvedObject"]["kind"] for b in events.bodies} == {"Node"}
    text = generate_latest(metrics.registry).decode()
    assert 'sriov_dra_device_health_changes_total{health="Unhealthy",reason="PFLinkDown"} 2.0' in text
    assert 'sriov_dra_device_health_changes_total{health="Healthy",reason="DeviceRecovered"} 1.0' in text
    assert "sriov_dra_unhealthy_devices 1.0" in text
