"""The status.devices writer over an in-memory claim store with resourceVersion checks."""

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from sriov_contract.errors import ReasonedError
from sriov_dra.apierrors import api_error
from sriov_dra.core.devicestatus import DeviceReport, status_key
from sriov_dra.prepare.devicestatus import (
    BACKOFF_STEPS,
    SETTLE_AFTER_WRITE,
    DeviceStatusWriter,
    conflict_delay,
)

OURS = "sriovnetwork.k8snetworkplumbingwg.io"
FOREIGN = {"driver": "gpu.nvidia.com", "pool": "node-0", "device": "gpu-0", "data": {"uuid": "g"}}


class Claims:
    def __init__(self):
        self.claim: dict[str, Any] = {
            "metadata": {
                "namespace": "ns",
                "name": "c",
                "uid": "u1",
                "resourceVersion": "1",
                "generation": 1,
            },
            "status": {"devices": [copy.deepcopy(FOREIGN)]},
        }
        self.gets = 0
        self.writes = 0
        self.deny = 0
        self.race = 0  # a concurrent writer bumps the resourceVersion before each of our next writes
        self.invalid = ""
        self.gone = False

    def get_claim(self, namespace, name):
        self.gets += 1
        if self.gone:
            raise ReasonedError("ClaimNotFound", "gone")
        return copy.deepcopy(self.claim)

    def patch_claim_status(self, namespace, name, ops):
        self.writes += 1
        if self.deny:
            self.deny -= 1
            raise api_error(403, "PATCH", "ResourceClaim ns/c status", "forbidden")
        if self.race:
            self.race -= 1
            self._bump()
        test, add = ops
        assert (test["op"], test["path"], add["op"], add["path"]) == (
            "test",
            "/metadata/resourceVersion",
            "add",
            "/status/devices",
        )
        if test["value"] != self.claim["metadata"]["resourceVersion"]:
            raise api_error(422, "PATCH", "ResourceClaim ns/c status", "test failed")
        if self.invalid:
            raise api_error(422, "PATCH", "ResourceClaim ns/c status", self.invalid)
        self.claim["status"]["devices"] = copy.deepcopy(add["value"])
        self._bump()
        return copy.deepcopy(self.claim)

    def _bump(self):
        meta = self.claim["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)


class Clock:
    def __init__(self):
        self.t = 0.0
        self.slept = []

    def sleep(self, s):
        self.slept.append(s)
        self.t += s


def writer(api, clock):
    return DeviceStatusWriter(
        api,
        now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
        clock=lambda: clock.t,
        sleep=clock.sleep,
        rand=lambda: 0.5,
    )


REPORT = DeviceReport(OURS, "node-0", "vf-1", {"attachmentID": "a"}, "ShadowReady", "ready")


@pytest.fixture
def api():
    return Claims()


@pytest.fixture
def clock():
    return Clock()


def test_publish_writes_once_and_a_repeat_writes_nothing(api, clock):
    w = writer(api, clock)
    assert w.publish(api.get_claim("ns", "c"), [REPORT]) is True
    devices = api.claim["status"]["devices"]
    assert devices[0] == FOREIGN and [d["device"] for d in devices] == ["gpu-0", "vf-1"]
    assert w.publish(api.get_claim("ns", "c"), [REPORT]) is False
    assert api.writes == 1


def test_conflict_rereads_and_remerges_with_upstream_backoff(api, clock):
    api.race = 2
    assert writer(api, clock).publish(api.get_claim("ns", "c"), [REPORT]) is True
    assert api.writes == 3 and api.gets == 3
    assert clock.slept == pytest.approx([0.105, 0.21])
    assert clock.slept == [conflict_delay(0, 0.5), conflict_delay(1, 0.5)]
    assert [d["device"] for d in api.claim["status"]["devices"]] == ["gpu-0", "vf-1"]


def test_conflicts_give_up_after_the_bounded_steps(api, clock):
    api.race = 100
    with pytest.raises(ReasonedError) as err:
        writer(api, clock).publish(api.get_claim("ns", "c"), [REPORT])
    assert err.value.reason == "Invalid" and api.writes == BACKOFF_STEPS
    assert conflict_delay(10, 0.0) == 2.0


@pytest.mark.parametrize(
    ("detail", "reason"),
    [
        ('status.allocation: Invalid value: "...": field is immutable', "Invalid"),
        (
            'status.devices: Forbidden: changing status.devices requires resource="resourceclaims/driver", '
            'verb="[arbitrary-node:patch]" permission',
            "DeviceStatusForbidden",
        ),
    ],
)
def test_a_refused_write_is_not_retried_as_a_conflict(api, clock, detail, reason):
    api.invalid = detail
    with pytest.raises(ReasonedError) as err:
        writer(api, clock).publish(api.get_claim("ns", "c"), [REPORT])
    assert err.value.reason == reason and api.writes == 1 and api.gets == 2


def test_a_forbidden_write_backs_off_patient_callers_only(api, clock):
    w = writer(api, clock)
    api.deny = 2
    with pytest.raises(ReasonedError):
        w.publish(api.get_claim("ns", "c"), [REPORT])
    assert w.publish(api.get_claim("ns", "c"), [REPORT], patient=True) is False
    assert api.writes == 1
    with pytest.raises(ReasonedError):  # kubelet's prepare always tries
        w.publish(api.get_claim("ns", "c"), [REPORT])
    clock.t += 10.0
    assert w.publish(api.get_claim("ns", "c"), [REPORT], patient=True) is True
    assert api.writes == 3


def test_a_patient_caller_holding_a_claim_read_before_a_fresh_write_does_not_write(api, clock):
    w = writer(api, clock)
    stale = api.get_claim("ns", "c")
    assert w.publish(api.get_claim("ns", "c"), [REPORT]) is True
    assert w.publish(stale, [REPORT], patient=True) is False
    assert api.writes == 1 and api.gets == 2
    clock.t += SETTLE_AFTER_WRITE
    api.claim["status"]["devices"] = [FOREIGN]  # someone removed our entry later on
    assert w.publish(api.get_claim("ns", "c"), [REPORT], patient=True) is True


def test_withdraw_removes_only_our_entries_and_tolerates_a_missing_or_replaced_claim(api, clock):
    w = writer(api, clock)
    w.publish(api.get_claim("ns", "c"), [REPORT])
    ours = {status_key({"driver": OURS, "pool": "node-0", "device": "vf-1"})}
    assert w.withdraw("ns", "c", "other-uid", ours) is False
    assert w.withdraw("ns", "c", "u1", ours) is True
    assert api.claim["status"]["devices"] == [FOREIGN]
    assert w.withdraw("ns", "c", "u1", ours) is False
    api.gone = True
    assert w.withdraw("ns", "c", "u1", ours) is False
