from __future__ import annotations

import pytest

from sriov_operator.core.keys import policy_attributes_name, pool_attributes_name, pool_of


@pytest.mark.parametrize(
    ("resource", "pool"),
    [("sriov_vfs", "sriov-vfs"), ("Intel_NICs", "intel-nics"), ("__", "sriov"), ("a.b", "ab")],
)
def test_pool_names_follow_upstream(resource, pool) -> None:
    assert pool_of(resource) == pool
    assert pool_attributes_name(resource) == f"{pool}-attrs"


def test_per_policy_names_carry_the_full_uid() -> None:
    assert policy_attributes_name("0b3c-11") == "dra-policy-0b3c-11-attrs"
