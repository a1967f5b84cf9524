"""Issue 31 item 6: a NAD config may carry credentials (an IPAM token, a password); the driver copies
those bytes into the shadow but never into a log line, an Event or kubelet's error string.
Kubeconfig paths may appear; their contents and tokens may not."""

from __future__ import annotations

import json
import logging

import pytest

from tests.fakes.driver_env import Env, vf_config

VF1, VF2 = "0000-17-00-1", "0000-17-00-2"
SECRET = "planted-secret-" + "c0ffee" * 6


def config(name: str, plugin: str) -> str:
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": name,
            "type": plugin,
            "password": SECRET,
            "ipam": {
                "type": "whereabouts",
                "range": "10.56.217.0/24",
                "kubernetes": {"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"},
                "token": SECRET,
            },
        }
    )


def test_a_secret_planted_in_a_nad_config_reaches_no_log_line(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    env.source_nad(config=config("rail-a", "sriov"))
    _pod, ref = env.pod_with_claim([VF1], [vf_config(netAttachDefName="rail-a")])
    assert env.prepare(ref).error == ""
    (shadow,) = env.shadows()
    assert SECRET in shadow["spec"]["config"]  # the bytes are the shadow's: the test can see them
    assert env.unprepare(ref) == ""
    # a template the driver refuses: the error names the NAD and the rule, not the config
    env.source_nad("broken", config=config("broken", "macvlan"))
    _pod, refused = env.pod_with_claim([VF2], [vf_config(netAttachDefName="broken")])
    out = env.prepare(refused)
    assert out.error.startswith("UnsupportedCNIConfig"), out.error
    assert SECRET not in out.error and "broken" in out.error
    written = [json.dumps(obj) for key, obj in env.api.objects.items() if key[0] == "events"]
    leaks = [r.getMessage() for r in caplog.records if SECRET in r.getMessage()]
    assert leaks == [] and not [e for e in written if SECRET in e]
