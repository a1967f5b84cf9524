import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_contract.errors import ContractError, ReasonedError
from sriov_contract.identity import shadow_name_for
from sriov_contract.registry import RegistryEntry, parse_registry
from sriov_dra.core.errors import DriverCoreError
from sriov_dra.core.selection import (
    ANNOTATIONS_SIZE_LIMIT,
    ManagedBinding,
    PatchOp,
    json_pointer,
    merge_managed_selections,
    release_claim_selections,
)
from sriov_dra.core.template import NamespacedName

NS = "ai-workloads"
POD_UID = "00000000-0000-0000-0000-0000000000aa"
CLAIM_A = "00000000-0000-0000-0000-0000000000c1"
CLAIM_B = "00000000-0000-0000-0000-0000000000c2"
NETWORKS = "k8s.v1.cni.cncf.io/networks"
REGISTRY = "sriovnetwork.k8snetworkplumbingwg.io/managed-networks"
RAIL_A = NamespacedName(NS, "rail-a-net")
RAIL_B = NamespacedName(NS, "rail-b-net")


def binding(n, claim=CLAIM_A, source=RAIL_A, interface=None):
    attachment = hashlib.sha256(f"att-{n}".encode()).hexdigest()
    entry = RegistryEntry(
        attachment_id=attachment,
        claim_uid=claim,
        namespace=NS,
        name=shadow_name_for(attachment),
        uid=f"00000000-0000-0000-0000-{n:012d}",
        interface=interface or f"dra{n}",
        config_sha256="ab" * 32,
    )
    return ManagedBinding(entry, source)


def pod(annotations=None, missing=False):
    meta = {"name": "p", "namespace": NS, "uid": POD_UID, "resourceVersion": "41"}
    if not missing:
        meta["annotations"] = annotations
    return {"metadata": meta}


def apply(p, ops):
    """A minimal RFC 6902 applier for the operations our patches use, checking the tests."""
    doc = json.loads(json.dumps(p))
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        parent = doc
        for t in tokens[:-1]:
            parent = parent[t]
        last = tokens[-1]
        if op["op"] == "test":
            assert parent[last] == op["value"]
        elif op["op"] == "remove":
            del parent[last]
        elif op["op"] == "replace":
            assert last in parent
            parent[last] = op["value"]
        else:
            assert op["op"] == "add"
            parent[last] = op["value"]
    return doc


def written(ops: list[PatchOp] | None) -> list[PatchOp]:
    """The patch of a change the test expects to need writing."""
    assert ops is not None, "nothing to write, but the test expects a patch"
    return ops


def annotations_after(p, desired):
    ops = written(merge_managed_selections(p, desired))
    assert ops[:2] == [
        {"op": "test", "path": "/metadata/uid", "value": POD_UID},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
    ]
    return apply(p, ops)["metadata"]["annotations"]


def selected(annotations):
    return json.loads(annotations[NETWORKS])


def test_nil_annotations_map_is_created_under_the_preconditions():
    b = binding(0)
    ops = written(merge_managed_selections(pod(None), [b]))
    assert ops[2]["op"] == "add" and ops[2]["path"] == "/metadata/annotations"
    ann = apply(pod(None), ops)["metadata"]["annotations"]
    assert selected(ann) == [{"name": b.entry.name, "namespace": NS, "interface": "dra0"}]
    assert parse_registry(ann[REGISTRY]).entries == (b.entry,)


def test_missing_annotations_key_is_like_nil():
    ops = written(merge_managed_selections(pod(missing=True), [binding(0)]))
    assert ops[2]["path"] == "/metadata/annotations"


def test_unrelated_entries_survive_raw_and_managed_ones_append_in_plan_order():
    manual = '[{"name":"mgmt","ips":["10.0.0.5/24"],"x-unknown":{"b":1.50,"a":12345678901234567890}}]'
    ann = annotations_after(pod({NETWORKS: manual, "other": "x"}), [binding(1), binding(0)])
    text = ann[NETWORKS]
    assert text.startswith(manual[:-1] + ",")
    assert [s["interface"] for s in selected(ann)[1:]] == ["dra1", "dra0"]
    assert ann["other"] == "x"


def test_shorthand_manual_entries_are_preserved_as_json():
    ann = annotations_after(pod({NETWORKS: "infra/mgmt@eth5, other"}), [binding(0)])
    assert selected(ann)[:2] == [
        {"name": "mgmt", "namespace": "infra", "interface": "eth5"},
        {"name": "other"},
    ]


def test_existing_keys_use_replace_and_missing_use_add():
    ops = written(merge_managed_selections(pod({NETWORKS: "mgmt"}), [binding(0)]))
    assert [(o["op"], o["path"]) for o in ops[2:]] == [
        ("replace", "/metadata/annotations/k8s.v1.cni.cncf.io~1networks"),
        ("add", "/metadata/annotations/sriovnetwork.k8snetworkplumbingwg.io~1managed-networks"),
    ]


def test_pointer_escaping():
    assert json_pointer("a~b", "c/d") == "/a~0b/c~1d"
    assert json_pointer("~1") == "/~01"


def test_semantically_identical_result_is_a_noop():
    p = pod(annotations_after(pod({NETWORKS: '[{"name":"m","v":1.0}]'}), [binding(0), binding(1)]))
    assert merge_managed_selections(p, [binding(0), binding(1)]) is None
    assert merge_managed_selections(p, [binding(1)]) is None
    assert merge_managed_selections(p, []) is None


def test_shorthand_without_changes_is_not_rewritten():
    assert merge_managed_selections(pod({NETWORKS: "a,b"}), []) is None


def test_removed_managed_selection_is_repaired():
    b0, b1 = binding(0), binding(1)
    ann = annotations_after(pod(None), [b0, b1])
    kept = [s for s in selected(ann) if s["interface"] != "dra0"]
    ann2 = annotations_after(pod({**ann, NETWORKS: json.dumps(kept)}), [b0, b1])
    assert [s["interface"] for s in selected(ann2)] == ["dra1", "dra0"]


def test_other_claims_registered_entries_are_kept_when_merging():
    ann = annotations_after(pod(None), [binding(0, CLAIM_B, RAIL_B)])
    ann2 = annotations_after(pod(ann), [binding(1)])
    assert [e.claim_uid for e in parse_registry(ann2[REGISTRY]).entries] == [CLAIM_B, CLAIM_A]


def test_manual_selection_of_a_managed_source_is_refused():
    for manual in [
        "rail-a-net",
        f"{NS}/rail-a-net@net1",
        '[{"name":"rail-a-net","namespace":"ai-workloads"}]',
    ]:
        with pytest.raises(DriverCoreError) as err:
            merge_managed_selections(pod({NETWORKS: manual}), [binding(0)])
        assert err.value.reason == "ManualSelectionConflictsWithManagedTemplate"
        assert "rail-a-net" in err.value.message


def test_same_name_in_another_namespace_is_not_a_conflict():
    ann = annotations_after(pod({NETWORKS: "infra/rail-a-net"}), [binding(0)])
    assert len(selected(ann)) == 2


def test_generated_name_without_provenance_is_refused():
    b = binding(0)
    forged = json.dumps([{"name": b.entry.name, "namespace": NS, "interface": "dra0"}])
    with pytest.raises(DriverCoreError) as err:
        merge_managed_selections(pod({NETWORKS: forged}), [b])
    assert err.value.reason == "ManagedSelectionConflict"


def test_prefix_alone_is_not_ownership():
    other = json.dumps([{"name": "dra-sriov-" + "f" * 32, "namespace": NS}])
    ann = annotations_after(pod({NETWORKS: other}), [binding(0)])
    assert selected(ann)[0] == {"name": "dra-sriov-" + "f" * 32, "namespace": NS}
    assert len(parse_registry(ann[REGISTRY]).entries) == 1


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: {**s, "ips": ["10.0.0.9"]},
        lambda s: {**s, "interface": "evil0"},
        lambda s: {**s, "deviceID": "0000:99:00.1"},
    ],
)
def test_edited_managed_entries_are_an_ownership_conflict(edit):
    b = binding(0)
    ann = annotations_after(pod(None), [b])
    sels = selected(ann)
    ann[NETWORKS] = json.dumps([edit(sels[0])])
    with pytest.raises(DriverCoreError) as err:
        merge_managed_selections(pod(ann), [b])
    assert err.value.reason == "ManagedSelectionConflict"


def test_duplicated_managed_entry_is_a_conflict():
    b = binding(0)
    ann = annotations_after(pod(None), [b])
    ann[NETWORKS] = json.dumps(selected(ann) * 2)
    with pytest.raises(DriverCoreError) as err:
        merge_managed_selections(pod(ann), [b])
    assert "more than once" in err.value.message


def test_plan_that_disagrees_with_registry_is_a_conflict():
    ann = annotations_after(pod(None), [binding(0)])
    with pytest.raises(DriverCoreError) as err:
        merge_managed_selections(pod(ann), [binding(0, interface="net9")])
    assert err.value.reason == "ManagedSelectionConflict"


def test_registry_of_another_pod_is_refused():
    ann = annotations_after(pod(None), [binding(0)])
    ann[REGISTRY] = ann[REGISTRY].replace(POD_UID, "00000000-0000-0000-0000-0000000000bb")
    with pytest.raises(DriverCoreError) as err:
        merge_managed_selections(pod(ann), [binding(0)])
    assert err.value.reason == "ManagedSelectionConflict"


@pytest.mark.parametrize("registry", ["{", '{"version":2,"podUID":"x","entries":[]}'])
def test_malformed_or_unknown_registry_fails_instead_of_guessing(registry):
    with pytest.raises(ContractError):
        merge_managed_selections(pod({REGISTRY: registry}), [binding(0)])
    with pytest.raises(ContractError):
        release_claim_selections(pod({REGISTRY: registry}), CLAIM_A)


def test_malformed_networks_annotation_is_not_replaced():
    with pytest.raises(ReasonedError) as err:
        merge_managed_selections(pod({NETWORKS: "[{"}), [binding(0)])
    assert err.value.reason == "InvalidNetworksAnnotation"


def test_release_removes_only_that_claims_entries():
    manual = '{"name":"mgmt","z":1e3}'
    ann = annotations_after(
        pod({NETWORKS: f"[{manual}]"}), [binding(0), binding(1, CLAIM_B, RAIL_B), binding(2)]
    )
    after = apply(pod(ann), release_claim_selections(pod(ann), CLAIM_A))["metadata"]["annotations"]
    assert after[NETWORKS].startswith(f"[{manual},")
    assert [s["interface"] for s in selected(after)[1:]] == ["dra1"]
    assert [e.claim_uid for e in parse_registry(after[REGISTRY]).entries] == [CLAIM_B]


def test_release_of_last_claim_removes_both_keys_when_empty():
    ann = annotations_after(pod({"keep": "me"}), [binding(0)])
    ops = written(release_claim_selections(pod(ann), CLAIM_A))
    assert [o["op"] for o in ops[2:]] == ["remove", "remove"]
    assert apply(pod(ann), ops)["metadata"]["annotations"] == {"keep": "me"}


def test_release_without_entries_is_a_noop():
    assert release_claim_selections(pod(None), CLAIM_A) is None
    ann = annotations_after(pod(None), [binding(0, CLAIM_B)])
    assert release_claim_selections(pod(ann), CLAIM_A) is None


def test_annotation_size_counts_all_annotations():
    b = binding(0)
    base = annotations_after(pod(None), [b])
    used = sum(len(k) + len(v) for k, v in base.items())
    filler_key = "example.com/big"
    room = ANNOTATIONS_SIZE_LIMIT - used - len(filler_key)
    # Exactly at the limit is accepted; one more byte anywhere is refused.
    assert merge_managed_selections(pod({filler_key: "x" * room}), [b]) is not None
    with pytest.raises(DriverCoreError) as err:
        merge_managed_selections(pod({filler_key: "x" * (room + 1)}), [b])
    assert err.value.reason == "AnnotationTooLarge"


def test_annotation_size_counts_utf8_bytes():
    b = binding(0)
    base = annotations_after(pod(None), [b])
    room = ANNOTATIONS_SIZE_LIMIT - sum(len(k) + len(v) for k, v in base.items()) - 1
    with pytest.raises(DriverCoreError):
        merge_managed_selections(pod({"k": "é" * (room // 2 + 1)}), [b])


@given(
    st.lists(st.integers(0, 6), unique=True, max_size=5), st.lists(st.integers(0, 6), unique=True, max_size=5)
)
def test_merge_then_merge_is_a_noop_and_release_inverts(first, second):
    manual = '[{"name":"keep","q":0.50}]'
    p = pod({NETWORKS: manual})
    a = [binding(n) for n in first]
    ops = merge_managed_selections(p, a)
    p1 = apply(p, ops) if ops else p
    assert merge_managed_selections(p1, a) is None
    b = [binding(n + 10, CLAIM_B, RAIL_B) for n in second]
    ops = merge_managed_selections(p1, b)
    p2 = apply(p1, ops) if ops else p1
    ops = release_claim_selections(p2, CLAIM_B)
    p3 = apply(p2, ops) if ops else p2
    assert p3 == p1
