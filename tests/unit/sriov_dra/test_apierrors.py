"""What we repeat of an API server's refusal: enough to act on, never a NAD's CNI config."""

from __future__ import annotations

import json

from sriov_dra.apierrors import MAX_DETAIL, api_error, server_detail

CONFIG = json.dumps(
    {"cniVersion": "1.0.0", "type": "sriov", "ipam": {"type": "host-local", "subnet": "10.9.0.0/16"}}
)
# The shape the API server gives a field error: the value Go-quoted, then the rule it broke.
REFUSAL = (
    'NetworkAttachmentDefinition.k8s.cni.cncf.io "dra-sriov-1" is invalid: spec.config: '
    f"Invalid value: {json.dumps(CONFIG)}: spec.config in body should be at most 16 chars long"
)


def test_a_quoted_field_value_is_omitted_and_the_field_and_rule_kept():
    err = api_error(422, "create", "NetworkAttachmentDefinition ns/dra-sriov-1", REFUSAL)
    assert "ipam" not in err.message and "10.9.0.0" not in err.message
    assert 'spec.config: Invalid value: "<omitted>": spec.config in body should be at most 16' in err.message
    assert err.reason == "Invalid" and err.status == 422


def test_every_quoted_value_of_a_multi_field_refusal_is_omitted():
    text = (
        'spec.a: Invalid value: "x\\"y": bad, spec.b: Invalid value: "z": bad, spec.c: Invalid value: 3: bad'
    )
    assert server_detail(text) == (
        'spec.a: Invalid value: "<omitted>": bad, spec.b: Invalid value: "<omitted>": bad, '
        "spec.c: Invalid value: 3: bad"
    )


def test_a_long_message_is_bounded():
    said = server_detail("x" * 5000)
    assert len(said) == MAX_DETAIL and said.endswith("...")
    assert server_detail("short") == "short"
