"""The pure health verdict: VF gone or PF link down is Unhealthy, nothing else is."""

import pytest

from sriov_dra.core.devicehealth import (
    HEALTHY,
    NO_SCHEDULE,
    UNHEALTHY_TAINT_KEY,
    Observation,
    Verdict,
    changed,
    judge,
    judge_all,
    taints,
)


def seen(present: bool = True, operstate: str | None = "up", carrier: str | None = "1") -> Observation:
    return Observation(vf_present=present, pf_name="ens1f0", pf_operstate=operstate, pf_carrier=carrier)


def test_vf_present_and_pf_up_is_healthy() -> None:
    assert judge("vf-0", seen()) == HEALTHY and HEALTHY.healthy


@pytest.mark.parametrize("operstate", ["down", "DOWN\n", "lowerlayerdown", "notpresent"])
def test_pf_operstate_down_is_pf_link_down(operstate: str) -> None:
    verdict = judge("vf-0", seen(operstate=operstate, carrier=None))
    assert verdict.reason == "PFLinkDown" and not verdict.healthy
    assert "ens1f0" in verdict.message and "vf-0" in verdict.message


def test_no_carrier_is_pf_link_down_even_when_operstate_says_unknown() -> None:
    assert judge("vf-0", seen(operstate="unknown", carrier="0")).reason == "PFLinkDown"


def test_vanished_vf_is_vf_missing_whatever_its_pf_shows() -> None:
    assert judge("vf-0", seen(present=False, operstate="down")).reason == "VFMissing"


@pytest.mark.parametrize(
    ("operstate", "carrier"), [(None, None), ("unknown", None), ("dormant", "1"), ("up", "")]
)
def test_unreadable_or_unclear_link_state_is_no_evidence_of_a_fault(
    operstate: str | None, carrier: str | None
) -> None:
    assert judge("vf-0", seen(operstate=operstate, carrier=carrier)).healthy


def test_changed_counts_a_device_new_to_the_map_as_previously_healthy() -> None:
    before = {"a": HEALTHY, "b": judge("b", seen(operstate="down"))}
    after = judge_all(
        {"a": seen(operstate="down"), "b": seen(operstate="down"), "c": seen(), "d": seen(present=False)}
    )
    assert set(changed(before, after)) == {"a", "d"}
    assert changed(after, after) == {}
    assert changed(after, judge_all({"a": seen(), "b": seen(), "c": seen(), "d": seen()})).keys() == {
        "a",
        "b",
        "d",
    }


def test_taint_is_no_schedule_under_the_driver_domain_valued_with_the_reason() -> None:
    assert taints(None) == [] and taints(HEALTHY) == []
    assert taints(Verdict("PFLinkDown", "m")) == [
        {
            "key": "sriovnetwork.k8snetworkplumbingwg.io/unhealthy",
            "value": "PFLinkDown",
            "effect": "NoSchedule",
        }
    ]
    assert (
        UNHEALTHY_TAINT_KEY.startswith("sriovnetwork.k8snetworkplumbingwg.io/")
        and NO_SCHEDULE == "NoSchedule"
    )
