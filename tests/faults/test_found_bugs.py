"""Fast, in-memory regressions for the bugs the fault matrix found (the matrix cell is the
end-to-end proof; these pin the exact decision on every plain run)."""

from __future__ import annotations

import pytest

from tests.fakes.driver_env import Env, vf_config
from tests.fakes.kube_api import Fault

pytestmark = pytest.mark.faults


def test_a_notfound_answer_to_the_finalizer_patch_is_confirmed_by_a_read(tmp_path) -> None:
    """Matrix cell "finalizer patch x NotFound": the shadow still exists although its finalizer
    patch answered 404. Release must not forget the claim with our finalizer still on it."""
    env = Env(tmp_path)
    env.source_nad()
    _pod, ref = env.pod_with_claim(["0000-17-00-1"], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    assert len(env.shadows()) == 1
    env.api.fail("patch", "nads", Fault(404))
    assert env.unprepare(ref) == ""
    assert env.shadows() == []
    assert env.checkpoint.snapshot_claim(ref.uid) is None
