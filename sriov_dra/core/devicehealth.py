"""Device health: whether a VF can carry traffic, decided from what the node shows of it.

A VF is Unhealthy when it is gone from sysfs or when its PF has no link (the VF's traffic leaves
through the PF, so a down uplink makes every VF on it useless); it is Healthy again as soon as
neither holds. Only evidence of a fault counts: a link state that cannot be read (a PF without
``operstate``, ``carrier`` refused on a down interface) is no fault, so a node whose sysfs lacks
those files never has its devices tainted.

The verdict reaches two places: the kubelet's DRA resource-health stream (the Pod's
``allocatedResourcesStatus``, KEP-4680) and a ``NoSchedule`` taint on the device in the
ResourceSlice (KEP-5055), so the scheduler gives no new claim an Unhealthy VF.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sriov_dra.model import DRIVER_NAME
from sriov_dra.reasons import PF_LINK_DOWN, VF_MISSING

# Stable and documented (docs/troubleshooting.md): tolerating it is how a claim opts in to
# Unhealthy VFs. The taint's value is the reason, PFLinkDown or VFMissing.
UNHEALTHY_TAINT_KEY: Final = f"{DRIVER_NAME}/unhealthy"
NO_SCHEDULE: Final = "NoSchedule"

# The kernel's operstates that mean no traffic flows (RFC 2863 names, as in /sys/class/net/*/operstate).
_LINK_DOWN_STATES: Final = frozenset({"down", "lowerlayerdown", "notpresent"})


@dataclass(frozen=True)
class Observation:
    """What the node shows of one VF: whether it still exists and its PF's link state files
    (None where a file could not be read)."""

    vf_present: bool
    pf_name: str
    pf_operstate: str | None = None
    pf_carrier: str | None = None


@dataclass(frozen=True)
class Verdict:
    """A VF's health; ``reason`` is empty when healthy."""

    reason: str = ""
    message: str = ""

    @property
    def healthy(self) -> bool:
        return not self.reason


HEALTHY: Final = Verdict()


def judge(device: str, seen: Observation) -> Verdict:
    """The health of ``device`` from one observation."""
    if not seen.vf_present:
        return Verdict(VF_MISSING, f"{VF_MISSING}: VF {device} is gone from sysfs")
    operstate = (seen.pf_operstate or "").strip().lower()
    if operstate in _LINK_DOWN_STATES:
        return Verdict(PF_LINK_DOWN, f"{PF_LINK_DOWN}: PF {seen.pf_name} of VF {device} is {operstate}")
    if (seen.pf_carrier or "").strip() == "0":
        return Verdict(PF_LINK_DOWN, f"{PF_LINK_DOWN}: PF {seen.pf_name} of VF {device} has no carrier")
    return HEALTHY


def judge_all(seen: Mapping[str, Observation]) -> dict[str, Verdict]:
    return {device: judge(device, observation) for device, observation in seen.items()}


def changed(before: Mapping[str, Verdict], after: Mapping[str, Verdict]) -> dict[str, Verdict]:
    """The devices whose verdict differs (a device not in ``before`` counts as healthy)."""
    return {name: v for name, v in after.items() if before.get(name, HEALTHY) != v}


def taints(verdict: Verdict | None) -> list[dict[str, str]]:
    """The ResourceSlice taints a device carries for its verdict (none when healthy)."""
    if verdict is None or verdict.healthy:
        return []
    return [{"key": UNHEALTHY_TAINT_KEY, "value": verdict.reason, "effect": NO_SCHEDULE}]
