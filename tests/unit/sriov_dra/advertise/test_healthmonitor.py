"""The device health monitor: a change updates the taints, wakes the stream and is told once."""

import threading

from sriov_dra.advertise.healthmonitor import DeviceHealthMonitor
from sriov_dra.advertise.inventory import DeviceState
from sriov_dra.core.devicehealth import Observation, Verdict
from sriov_dra.model import VirtualFunction


def vf(i: int) -> VirtualFunction:
    return VirtualFunction(f"0000-17-00-{i}", f"0000:17:00.{i}", "0000:17:00.0", "ens1f0", i - 1)


class World:
    def __init__(self) -> None:
        self.operstate = "up"
        self.gone: set[str] = set()

    def observe(self) -> dict[str, Observation]:
        return {
            name: Observation(name not in self.gone, "ens1f0", self.operstate, None)
            for name in ("0000-17-00-1", "0000-17-00-2")
        }


def monitor() -> tuple[World, DeviceState, DeviceHealthMonitor, list[str], list[tuple[str, Verdict]]]:
    world = World()
    state = DeviceState({v.name: v for v in (vf(1), vf(2))})
    state.update_policy_devices({"0000-17-00-1": {}})  # only VF 1 is advertised
    republished: list[str] = []
    told: list[tuple[str, Verdict]] = []
    mon = DeviceHealthMonitor(
        world.observe,
        state,
        pool="node-a",
        republish=lambda: republished.append("x"),
        tell=lambda d, v: told.append((d, v)),
    )
    return world, state, mon, republished, told


def test_link_down_taints_the_advertised_vf_tells_each_change_once_and_recovery_clears() -> None:
    world, state, mon, republished, told = monitor()
    assert mon.check() == {} and republished == [] and told == []
    world.operstate = "down"
    assert set(mon.check()) == {"0000-17-00-1", "0000-17-00-2"}
    assert republished == ["x"] and [d for d, _ in told] == ["0000-17-00-1", "0000-17-00-2"]
    (advertised,) = state.advertised()
    assert advertised.health.reason == "PFLinkDown" and mon.unhealthy() == 2
    assert mon.check() == {} and len(told) == 2  # no change, nothing told again

    world.operstate = "up"
    mon.check()
    assert all(v.healthy for _, v in told[2:]) and len(told) == 4 and republished == ["x", "x"]
    assert state.advertised()[0].health.healthy and mon.unhealthy() == 0


def test_an_unadvertised_vf_changing_needs_no_republish_but_is_still_told() -> None:
    world, _state, mon, republished, told = monitor()
    mon.check()
    world.gone = {"0000-17-00-2"}
    assert set(mon.check()) == {"0000-17-00-2"}
    assert republished == [] and told[0][1].reason == "VFMissing"


def test_reports_wait_for_a_new_version_and_carry_every_device() -> None:
    world, _state, mon, _republished, _told = monitor()
    mon.check()
    version, reports = mon.reports(-1, 0)
    assert [(r.pool, r.device, r.healthy) for r in reports] == [
        ("node-a", "0000-17-00-1", True),
        ("node-a", "0000-17-00-2", True),
    ]
    assert mon.reports(version, 0.01)[0] == version  # nothing new: back after the timeout
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(mon.reports(version, 30)[0]))
    waiter.start()
    world.operstate = "down"
    mon.check()
    waiter.join(10)
    assert got == [version + 1]
    assert [r.message for r in mon.reports(-1, 0)[1]] == [
        "PFLinkDown: PF ens1f0 of VF 0000-17-00-1 is down",
        "PFLinkDown: PF ens1f0 of VF 0000-17-00-2 is down",
    ]
