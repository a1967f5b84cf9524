from __future__ import annotations

from typing import Any

from sriov_operator.core.conditions import next_condition

OLD = {
    "type": "T",
    "status": "False",
    "reason": "R",
    "message": "m",
    "observedGeneration": 2,
    "lastTransitionTime": "t0",
}


def obj(generation: int = 2, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"generation": generation}, "status": {"conditions": conditions or []}}


def test_an_identical_condition_is_not_rewritten() -> None:
    assert (
        next_condition(obj(conditions=[OLD]), "T", status="False", reason="R", message="m", now="t1") is None
    )


def test_a_new_generation_rewrites_but_keeps_the_transition_time() -> None:
    new = next_condition(obj(3, [OLD]), "T", status="False", reason="R", message="m", now="t1")
    assert new == {**OLD, "observedGeneration": 3}


def test_a_status_change_moves_the_transition_time() -> None:
    new = next_condition(obj(conditions=[OLD]), "T", status="True", reason="R", message="m", now="t1")
    assert new is not None and new["lastTransitionTime"] == "t1"


def test_a_first_condition_and_other_types() -> None:
    other = {**OLD, "type": "Other"}
    new = next_condition(obj(conditions=[other]), "T", status="True", reason="A", message="m", now="t1")
    assert new is not None and new["observedGeneration"] == 2
    assert next_condition({}, "T", status="True", reason="A", message="m", now="t")["observedGeneration"] == 0  # type: ignore[index]
