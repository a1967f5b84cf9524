"""Policy evaluation: opt-in, first policy by name then first config, blocked never falls through."""

from pathlib import Path
from typing import Any

import pytest

from sriov_dra.core.policy import evaluate, node_selector_matches
from sriov_dra.sysfs.discovery import discover
from tests.fakes.sysfs import add_pf

NAME = "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName"


@pytest.fixture
def inventory(tmp_path: Path):
    add_pf(tmp_path, "0000:17:00.0", "ens1f0", 2)
    add_pf(tmp_path, "0000:31:00.0", "ens2f0", 2, pcie_root="pci0000:30", port="0000:30:01.0", link_type="32")
    return discover(tmp_path)


def pol(name, configs, node_selector=None):
    spec = {"configs": configs}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"name": name}, "spec": spec}


def attrs(name, labels, attributes):
    return {"metadata": {"name": name, "labels": labels}, "spec": {"attributes": attributes}}


def run(inventory, policies, device_attributes=(), labels=None, managed=False):
    return evaluate(
        policies=policies,
        device_attributes=list(device_attributes),
        node_name="node-a",
        node_labels=labels or {"kubernetes.io/hostname": "node-a"},
        inventory=inventory,
        managed=managed,
    )


def test_no_policy_advertises_nothing(inventory) -> None:
    assert run(inventory, []).eligible == {}


def test_catch_all_policy_advertises_everything(inventory) -> None:
    out = run(inventory, [pol("all", [{}])])
    assert sorted(out.eligible) == ["0000-17-00-1", "0000-17-00-2", "0000-31-00-1", "0000-31-00-2"]
    assert all(v == {} for v in out.eligible.values())


def test_first_policy_by_name_and_first_config_win(inventory) -> None:
    das = [
        attrs("a", {"rail": "0"}, {"example.com/rail": {"string": "r0"}}),
        attrs("b", {"rail": "1"}, {"example.com/rail": {"string": "r1"}}),
    ]
    policies = [
        pol("z-late", [{"deviceAttributesSelector": {"matchLabels": {"rail": "1"}}}]),
        pol(
            "a-early",
            [
                {
                    "resourceFilters": [{"pfNames": ["ens1f0"]}],
                    "deviceAttributesSelector": {"matchLabels": {"rail": "0"}},
                },
                {
                    "resourceFilters": [{"linkType": "eth"}],
                    "deviceAttributesSelector": {"matchLabels": {"rail": "1"}},
                },
            ],
        ),
    ]
    out = run(inventory, policies, das)
    assert out.eligible["0000-17-00-1"] == {"example.com/rail": {"string": "r0"}}
    # the IB PF is not matched by a-early's eth filter, so z-late gets it
    assert out.eligible["0000-31-00-1"] == {"example.com/rail": {"string": "r1"}}


def test_device_attributes_merge_in_name_order(inventory) -> None:
    das = [
        attrs("b", {"x": "1"}, {"example.com/k": {"string": "from-b"}}),
        attrs("a", {"x": "1"}, {"example.com/k": {"string": "from-a"}, "example.com/only-a": {"int": 1}}),
    ]
    out = run(inventory, [pol("p", [{"deviceAttributesSelector": {"matchLabels": {"x": "1"}}}])], das)
    assert out.eligible["0000-17-00-1"] == {
        "example.com/k": {"string": "from-b"},
        "example.com/only-a": {"int": 1},
    }


def test_conflicting_reference_blocks_and_never_falls_through(inventory) -> None:
    das = [
        attrs("a", {"x": "1"}, {NAME: {"string": "rail0"}}),
        attrs("b", {"x": "1"}, {NAME: {"string": "rail1"}}),
    ]
    policies = [
        pol(
            "p",
            [
                {
                    "resourceFilters": [{"pfNames": ["ens1f0"]}],
                    "deviceAttributesSelector": {"matchLabels": {"x": "1"}},
                },
                {},
            ],
        )
    ]
    out = run(inventory, policies, das)
    assert set(out.blocked) == {"0000-17-00-1", "0000-17-00-2"}
    assert out.blocked["0000-17-00-1"].startswith("ConflictingTemplateReference:")
    assert sorted(out.eligible) == ["0000-31-00-1", "0000-31-00-2"]


def test_malformed_attribute_value_blocks(inventory) -> None:
    das = [attrs("a", {"x": "1"}, {"example.com/k": "plain"})]
    out = run(inventory, [pol("p", [{"deviceAttributesSelector": {"matchLabels": {"x": "1"}}}])], das)
    assert out.eligible == {} and out.blocked["0000-17-00-1"].startswith("InvalidDeviceAttribute:")


def test_unimplemented_filters_rejected_only_in_managed_mode(inventory) -> None:
    policies = [pol("p", [{"resourceFilters": [{"drivers": ["vfio-pci"]}]}])]
    assert sorted(run(inventory, policies).eligible) != []
    out = run(inventory, policies, managed=True)
    assert out.eligible == {} and all(r.startswith("UnsupportedPolicyFilter:") for r in out.blocked.values())


def test_a_vf_range_pf_name_blocks_the_devices_it_claims_in_managed_mode(inventory) -> None:
    # the plain name matches ens1f0's VFs; the '#' range beside it is what managed mode refuses
    policies = [pol("p", [{"resourceFilters": [{"pfNames": ["ens1f0", "ens1f0#0-1"]}]}])]
    assert sorted(run(inventory, policies).eligible) == ["0000-17-00-1", "0000-17-00-2"]
    out = run(inventory, policies, managed=True)
    assert out.eligible == {}
    reason = (
        "UnsupportedPolicyFilter: SriovResourcePolicy p configs[0]: pfNames with a '#' VF range is not "
        "implemented in automatic mode; use vendors, devices, pfNames, pfPciAddresses, pciAddresses or linkType"
    )
    assert out.blocked == {"0000-17-00-1": reason, "0000-17-00-2": reason}


def test_managed_mode_blocks_selector_without_matches(inventory) -> None:
    policies = [pol("p", [{"deviceAttributesSelector": {"matchLabels": {"none": "1"}}}])]
    assert len(run(inventory, policies).eligible) == 4
    out = run(inventory, policies, managed=True)
    assert out.eligible == {} and "UnresolvedDeviceAttributes" in out.blocked["0000-17-00-1"]


def test_reserved_keys_are_ignored_with_a_warning(inventory) -> None:
    das = [attrs("a", {"x": "1"}, {"resource.kubernetes.io/pcieRoot": {"string": "fake"}})]
    out = run(inventory, [pol("p", [{"deviceAttributesSelector": {"matchLabels": {"x": "1"}}}])], das)
    assert out.eligible["0000-17-00-1"] == {}
    assert "pcieRoot" in out.warnings[0]


def test_node_selector_follows_label_changes(inventory) -> None:
    sel = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "sriov", "operator": "In", "values": ["on"]}]}]
    }
    policies = [pol("p", [{}], sel)]
    assert run(inventory, policies, labels={"sriov": "off"}).eligible == {}
    assert len(run(inventory, policies, labels={"sriov": "on"}).eligible) == 4


def one_expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    """A node selector of one term with one matchExpression."""
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        requirement["values"] = list(values)
    return {"nodeSelectorTerms": [{"matchExpressions": [requirement]}]}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {}, True),
        ({"nodeSelectorTerms": []}, {}, True),
        ({"nodeSelectorTerms": [{}]}, {}, False),  # an empty term selects nothing
        (one_expression("a", "Exists"), {"a": ""}, True),
        (one_expression("a", "DoesNotExist"), {"a": ""}, False),
        (one_expression("n", "Gt", "3"), {"n": "4"}, True),
        (one_expression("n", "Lt", "3"), {"n": "4"}, False),
        (one_expression("n", "Gt", "x"), {"n": "4"}, False),  # a value that is no integer
        (one_expression("n", "Lt", "5"), {"n": "four"}, False),
        (one_expression("n", "Gt", "1", "2"), {"n": "4"}, False),  # Gt/Lt take exactly one value
        (one_expression("n", "Lt", "5"), {}, False),  # an absent label compares to nothing
        (one_expression("n", "Equals", "4"), {"n": "4"}, False),  # an unknown operator never matches
        (
            {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
                ]
            },
            {},
            True,
        ),
        (
            {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]}]},
                    {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]},
                ]
            },
            {"a": "1"},
            True,
        ),
    ],
)
def test_node_selector_semantics(selector, labels, expected) -> None:
    assert node_selector_matches(selector, "node-a", labels) is expected
