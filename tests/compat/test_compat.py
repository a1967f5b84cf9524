"""The differential suite (issue #18): every case through real Multus and through cni-shim, in
each of its modes, compared on what a runtime, a delegate and a Pod observer can see.

A case is ``same`` when nothing differs, ``deliberate`` when it is listed in ``DELIBERATE`` for that
mode (and must then still differ, so the table never goes stale; a code-only entry must match in
everything but the error code) and ``different`` otherwise. Known
differences that the product has not fixed yet are strict xfails naming their issue point
(``KNOWN``): the day the fix lands they pass, and strict turns that into a failure until the
entry is removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.compat.cases import BY_ID, CASES, DELIBERATE, FAST_THICK, KNOWN
from tests.compat.model import THICK, Case
from tests.compat.verdicts import record

if TYPE_CHECKING:
    from tests.compat.harness import Observation

pytestmark = [pytest.mark.integration, pytest.mark.netns]


def _params() -> list[object]:
    params: list[object] = []
    for case in CASES:
        for mode in case.modes:
            if mode == THICK and not case.kube and case.autoconf is None:
                # Multus thick needs a Pod (it refuses an empty K8S_POD_NAMESPACE): the
                # no-Kubernetes tests exist in thin mode only; s-missing-pod-name covers the refusal.
                continue
            marks: list[pytest.MarkDecorator] = []
            if case.full or (mode == THICK and case.id not in FAST_THICK):
                marks.append(pytest.mark.compat_full)
            known = KNOWN.get((case.id, mode))
            if known:
                marks.append(pytest.mark.xfail(strict=True, reason=known))
            params.append(pytest.param(case.id, mode, marks=marks, id=f"{case.id}-{mode}"))
    return params


@pytest.mark.parametrize(("case_id", "mode"), _params())
def test_same_as_multus(compat_world: Any, case_id: str, mode: str, request: pytest.FixtureRequest) -> None:
    from tests.compat.harness import MULTUS, OURS, run_autoconf, run_side  # noqa: PLC0415

    case = BY_ID[case_id]
    if case.autoconf is not None:
        multus_obs, ours_obs = (
            run_autoconf(compat_world, case, MULTUS),
            run_autoconf(compat_world, case, OURS),
        )
        _verdict(request, case, mode, multus_obs, ours_obs)
        return
    prepared = compat_world.prepared.get(case.id)
    observations: dict[str, Observation] = {}
    for side in (MULTUS, OURS):
        if prepared is not None:
            compat_world.reset_pod(case, prepared)
            if case.events:
                compat_world.clear_events(prepared.namespace)
            if any(s.pod_after for s in case.steps):
                compat_world.delete_pod(prepared.namespace)
        observations[side] = run_side(compat_world, case, mode, side)
    _verdict(request, case, mode, observations[MULTUS], observations[OURS])


def _verdict(
    request: pytest.FixtureRequest, case: Case, mode: str, multus_obs: Observation, ours_obs: Observation
) -> None:
    from tests.compat.harness import compare  # noqa: PLC0415

    diffs = compare(case, multus_obs, ours_obs)
    entry = DELIBERATE.get(case.id)
    if entry is not None and mode in entry.modes:
        record(request.config, request.node.nodeid, "deliberate")
        assert diffs, f"{case.id} is in DELIBERATE ({entry.reason}) but now matches Multus: drop the entry"
        if entry.code_only:
            rest = compare(case, multus_obs, ours_obs, spec_codes=True)
            assert not rest, f"{case.id} [{mode}] differs from Multus beyond the error code:\n" + "\n".join(
                rest
            )
        return
    record(request.config, request.node.nodeid, "different" if diffs else "same")
    assert not diffs, f"{case.id} [{mode}] differs from Multus ({case.source}: {case.test}):\n" + "\n".join(
        diffs
    )
