"""Device state: advertised membership changes are always reported; identity never overridden."""

import threading
from pathlib import Path

from sriov_dra.advertise.inventory import DeviceState, RWLock
from sriov_dra.model import ATTR_PCI_ADDRESS
from sriov_dra.sysfs.discovery import discover
from tests.fakes.sysfs import add_pf


def _state(tmp_path: Path) -> DeviceState:
    add_pf(tmp_path, "0000:17:00.0", "ens1f0", 2)
    return DeviceState(discover(tmp_path))


def test_withdrawal_with_empty_attributes_is_a_change(tmp_path: Path) -> None:
    state = _state(tmp_path)
    assert state.update_policy_devices({"0000-17-00-1": {}, "0000-17-00-2": {}}) is True
    assert state.update_policy_devices({"0000-17-00-1": {}, "0000-17-00-2": {}}) is False
    # the upstream bug: withdrawing a device whose policy attribute set was empty went unreported
    assert state.update_policy_devices({"0000-17-00-1": {}}) is True
    assert [a.vf.name for a in state.advertised()] == ["0000-17-00-1"]
    vf, adv = state.lookup("0000-17-00-2")
    assert vf is not None and adv is None  # hardware identity stays for teardown


def test_policy_attributes_layer_but_never_override_identity(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.update_policy_devices(
        {
            "0000-17-00-1": {
                "k8s.cni.cncf.io/resourceName": {"string": "rail0"},
                ATTR_PCI_ADDRESS: {"string": "x"},
            }
        }
    )
    (adv,) = state.advertised()
    assert adv.attributes["k8s.cni.cncf.io/resourceName"] == {"string": "rail0"}
    assert adv.attributes[ATTR_PCI_ADDRESS] == {"string": "0000:17:00.1"}
    assert (
        state.update_policy_devices({"0000-17-00-1": {"k8s.cni.cncf.io/resourceName": {"string": "rail1"}}})
        is True
    )
    assert state.update_policy_devices({"0000-17-00-1": {}}) is True
    assert "k8s.cni.cncf.io/resourceName" not in state.advertised()[0].attributes


def test_unknown_devices_are_never_advertised(tmp_path: Path) -> None:
    state = _state(tmp_path)
    assert state.update_policy_devices({"ghost": {}}) is False
    assert state.advertised() == []


def test_rwlock_excludes_writer_while_reading() -> None:
    lock = RWLock()
    order: list[str] = []
    reading = threading.Event()
    release = threading.Event()

    def reader() -> None:
        with lock.read():
            order.append("read")
            reading.set()
            release.wait(5)
        order.append("read-done")

    def writer() -> None:
        with lock.write():
            order.append("write")

    r = threading.Thread(target=reader)
    r.start()
    assert reading.wait(5)
    w = threading.Thread(target=writer)
    w.start()
    w.join(0.2)
    assert w.is_alive()  # blocked by the reader, not by a sleep race: it cannot finish yet
    release.set()
    r.join(5)
    w.join(5)
    assert order[0] == "read" and "write" in order
