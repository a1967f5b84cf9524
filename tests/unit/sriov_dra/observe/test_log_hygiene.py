"""The driver's logs of a managed prepare, a failed retry and a release: every line about a binding
names the Pod UID, claim UID, attachment ID and device; none carries CNI config or IPAM."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from sriov_dra.observe.bindingreporter import BindingReporter
from tests.fakes.driver_env import SOURCE_CONFIG, Env, vf_config
from tests.fakes.kube_api import Fault

VF1 = "0000-17-00-1"
# Everything that would reveal the network's configuration or its address plan.
SECRETS = ("ipam", "host-local", "10.56.217", "rangeStart", "cniVersion", '"type"', "vlan")


def test_binding_logs_carry_the_ids_and_never_config_or_ipam(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = Env(tmp_path)
    env.source_nad()
    env.service._observer = BindingReporter(None, None)  # the running agent's observer, no API
    pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    pod_uid = pod["metadata"]["uid"]

    with caplog.at_level(logging.DEBUG):
        env.api.fail("patch", "pods", Fault(403))
        assert env.prepare(ref).error.startswith("AccessDenied:")
        assert env.prepare(ref).error == ""
        record = env.checkpoint.snapshot_claim(ref.uid)
        assert record is not None
        attachment = str((record.devices[0].managed_binding or {})["attachmentID"])
        (shadow,) = env.shadows()
        assert env.unprepare(ref) == ""

    binding_lines = [r.getMessage() for r in caplog.records if r.name == "sriov_dra.observe.bindingreporter"]
    phases = [line.split(":", 1)[0] for line in binding_lines]
    assert phases == [
        "managed binding Pending",
        "managed prepare failed",
        "managed binding Ready",
        "managed binding Deleting",
        "managed binding ReleaseComplete",
        "managed binding Released",
    ]
    for line in binding_lines:
        assert f"pod_uid={pod_uid}" in line and f"claim_uid={ref.uid}" in line, line
        assert f"{VF1}={attachment}" in line, line

    config = shadow["spec"]["config"]
    everything = "\n".join(r.getMessage() for r in caplog.records)
    assert config not in everything and SOURCE_CONFIG not in everything
    assert json.loads(config)["ipam"]  # the frozen config really holds what must stay out
    for secret in SECRETS:
        assert secret not in everything, secret
