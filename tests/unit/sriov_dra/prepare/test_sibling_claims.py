"""Two claims of one Pod: a sibling claim whose shadow cannot be made is never published by the
other claim's Pod merge (spec 8.2: no half-made binding is ever visible to CNI)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sriov_contract.keys import CLAIM_UID_LABEL, REGISTRY_ANNOTATION
from sriov_contract.registry import parse_registry
from sriov_dra.apierrors import api_error
from tests.fakes.driver_env import Env, vf_config

VF1, VF2 = "0000-17-00-1", "0000-17-00-2"


class CreateFailsFor:
    """Wraps the fake API's NAD Create: every Create of the named claim's shadow fails with 500."""

    def __init__(self, env: Env, claim_uid: str) -> None:
        self._create = env.api.create_nad
        self.claim_uid = claim_uid
        self.refused = 0

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if body["metadata"]["labels"][CLAIM_UID_LABEL] == self.claim_uid:
            self.refused += 1
            raise api_error(500, "create", f"NetworkAttachmentDefinition {body['metadata']['name']}")
        return self._create(body)


def test_a_sibling_whose_shadow_create_fails_is_left_out_of_the_pod_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    env = Env(tmp_path)
    env.source_nad()
    pod = env.pod(claims=[{"name": "a", "resourceClaimName": "ca"}, {"name": "b", "resourceClaimName": "cb"}])
    configs = [vf_config(netAttachDefName="rail-a")]
    ca = env.claim("ca", pod, [VF1], configs)
    cb = env.claim("cb", pod, [VF2], configs)
    failing = CreateFailsFor(env, cb.uid)
    monkeypatch.setattr(env.api, "create_nad", failing)

    # the sibling gets as far as Pending: its VF is prepared, its shadow never made
    assert env.prepare(cb).error.startswith("ApiRequestFailed:")
    assert env.phases(cb.uid) == ["Pending"] and env.shadows() == []

    with caplog.at_level(logging.WARNING, logger="sriov_dra.prepare.managed"):
        assert env.prepare(ca).error == ""
    assert failing.refused == 2  # cb's shadow was tried again in ca's merge, and failed again
    (shadow,) = env.shadows()
    assert shadow["metadata"]["labels"][CLAIM_UID_LABEL] == ca.uid
    assert env.networks(pod) == [
        {"name": shadow["metadata"]["name"], "namespace": pod["metadata"]["namespace"], "interface": "dra0"}
    ]
    registry = parse_registry(env.live_pod(pod)["metadata"]["annotations"][REGISTRY_ANNOTATION])
    assert [e.claim_uid for e in registry.entries] == [ca.uid]
    assert env.phases(ca.uid) == ["Ready"] and env.phases(cb.uid) == ["Pending"]
    assert any(
        cb.uid in r.getMessage() and "left out of this merge" in r.getMessage() for r in caplog.records
    )

    # once the sibling's Create works, its own retry publishes it next to the first
    monkeypatch.undo()
    assert env.prepare(cb).error == ""
    assert [n["interface"] for n in env.networks(pod)] == ["dra0", "dra1"]
    assert env.phases(cb.uid) == ["Ready"] and len(env.shadows()) == 2
