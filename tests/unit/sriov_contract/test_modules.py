"""Contract modules: canonical identity bytes, strict parsing reasons, and round trips."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_contract import keys
from sriov_contract.binding import Binding, SourceRef, parse_binding
from sriov_contract.errors import ContractError
from sriov_contract.identity import BindingIdentity, config_sha256, parse_identity, shadow_name_for
from sriov_contract.registry import Registry, RegistryEntry, parse_registry
from sriov_contract.selection import SelectionElement, parse_selection

NODE = "6f1c1f7e-2c2a-4b8e-9d51-0a5e3c1b2d41"
POD = "0b8f3c7a-1d2e-4f5a-8b9c-7d6e5f4a3b21"
CLAIM = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
SHADOW_UID = "5d0c9a1e-7b3f-4e2a-9c8d-1f2e3a4b5c6d"


def identity(**over: object) -> BindingIdentity:
    fields: dict[str, object] = {
        "protocol_version": 1,
        "node_uid": NODE,
        "pod_uid": POD,
        "claim_uid": CLAIM,
        "driver": "sriovnetwork.k8snetworkplumbingwg.io",
        "pool": "worker-a",
        "device": "pf0vf1",
    }
    fields.update(over)
    return BindingIdentity(**fields)  # type: ignore[arg-type]


def binding(ident: BindingIdentity, **over: object) -> Binding:
    fields: dict[str, object] = {
        "version": 1,
        "attachment_id": ident.attachment_id(),
        "pod_uid": ident.pod_uid,
        "claim_uid": ident.claim_uid,
        "node_name": "worker-a",
        "node_uid": ident.node_uid,
        "source": SourceRef("ai-workloads", "rail-a-net", SHADOW_UID, "4711"),
        "pci_address": "0000:03:00.1",
        "interface": "dra0",
        "config_sha256": config_sha256(b'{"type":"sriov"}'),
    }
    fields.update(over)
    return Binding(**fields)  # type: ignore[arg-type]


def reason(fn: object, *args: object) -> str:
    with pytest.raises(ContractError) as info:
        fn(*args)  # type: ignore[operator]
    return info.value.reason


def test_canonical_bytes_are_length_prefixed_named_records() -> None:
    expected = (
        f"protocolVersion:1:1\nnodeUID:36:{NODE}\npodUID:36:{POD}\nclaimUID:36:{CLAIM}\n"
        "driver:36:sriovnetwork.k8snetworkplumbingwg.io\npool:8:worker-a\ndevice:6:pf0vf1\n"
    ).encode()
    ident = identity()
    assert ident.canonical_bytes() == expected
    assert ident.attachment_id() == hashlib.sha256(expected).hexdigest()
    assert ident.shadow_name() == "dra-sriov-" + hashlib.sha256(expected).hexdigest()[:32]


def test_lengths_count_utf8_bytes_not_characters() -> None:
    ident = identity(device="vf-é")
    assert b"device:5:vf-\xc3\xa9\n" in ident.canonical_bytes()


def test_field_boundaries_cannot_be_forged_by_embedded_separators() -> None:
    # Moving text between adjacent fields must change the digest even when it looks like a record.
    a = identity(pool="p\ndevice:1:x", device="y")
    b = identity(pool="p", device="x\ndevice:1:y")
    assert a.attachment_id() != b.attachment_id()


def decode_records(data: bytes) -> list[tuple[str, str]]:
    """An independent reader of the canonical form: if it round-trips, the form is unambiguous."""
    out = []
    while data:
        name, rest = data.split(b":", 1)
        size, rest = rest.split(b":", 1)
        value, end, data = rest[: int(size)], rest[int(size) : int(size) + 1], rest[int(size) + 1 :]
        assert end == b"\n"
        out.append((name.decode(), value.decode()))
    return out


identity_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=15)


@given(driver=identity_text, pool=identity_text, device=identity_text)
def test_canonical_bytes_decode_back_to_exactly_the_identity(driver: str, pool: str, device: str) -> None:
    ident = identity(driver=driver, pool=pool, device=device)
    assert decode_records(ident.canonical_bytes()) == [
        ("protocolVersion", "1"),
        ("nodeUID", NODE),
        ("podUID", POD),
        ("claimUID", CLAIM),
        ("driver", driver),
        ("pool", pool),
        ("device", device),
    ]


@given(st.text(max_size=300))
def test_any_text_either_parses_or_raises_a_contract_error(text: str) -> None:
    for parse in (parse_binding, parse_registry, parse_selection, parse_identity):
        try:
            parse(text)
        except ContractError as exc:
            assert exc.reason and exc.message


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    )
)
def test_any_json_document_either_parses_or_raises_a_contract_error(value: object) -> None:
    text = json.dumps(value)
    for parse in (parse_binding, parse_registry, parse_selection, parse_identity):
        try:
            parse(text)
        except ContractError as exc:
            assert exc.reason and exc.message


@given(st.data())
def test_one_edited_character_of_a_valid_document_parses_or_raises_a_contract_error(
    data: st.DataObject,
) -> None:
    ident = identity()
    reg = Registry(1, POD, (entry(ident),))
    for text, parse in ((binding(ident).to_json(), parse_binding), (reg.to_json(), parse_registry)):
        at = data.draw(st.integers(0, len(text) - 1))
        edit = data.draw(st.sampled_from(["delete", "replace", "insert"]))
        char = data.draw(st.characters(codec="utf-8") | st.sampled_from('{}[]",:\\0 '))
        edited = {
            "delete": text[:at] + text[at + 1 :],
            "replace": text[:at] + char + text[at + 1 :],
            "insert": text[:at] + char + text[at:],
        }[edit]
        try:
            parsed = parse(edited)
        except ContractError as exc:
            assert exc.reason and exc.message
        else:
            assert parse(parsed.to_json()) == parsed


@given(
    interface=st.text(
        st.characters(codec="utf-8", exclude_characters="/:", min_codepoint=0x21), min_size=1, max_size=7
    ),
    resource_version=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=128),
)
def test_valid_bindings_round_trip(interface: str, resource_version: str) -> None:
    try:
        b = binding(
            identity(), interface=interface, source=SourceRef("ns", "src", SHADOW_UID, resource_version)
        )
    except ContractError as exc:
        assert exc.reason == "InvalidInterfaceName"  # white space, controls, '.', '..' or > 15 bytes
        return
    assert parse_binding(b.to_json()) == b
    assert parse_binding(json.dumps(b.to_dict(), indent=1)) == b


def test_identity_json_round_trip_and_limits() -> None:
    ident = identity(pool="p" * 253)
    assert parse_identity(ident.to_json()) == ident
    with pytest.raises(ContractError) as info:
        identity(pool="p" * 254)
    assert info.value.reason == "InvalidIdentityField"
    with pytest.raises(ContractError) as info:
        identity(protocol_version=2)
    assert info.value.reason == "UnsupportedVersion"


def test_shadow_name_requires_full_digest() -> None:
    assert shadow_name_for("ab" * 32) == "dra-sriov-" + "ab" * 16
    assert reason(shadow_name_for, "AB" * 32) == "InvalidSHA256"
    assert reason(shadow_name_for, "ab" * 31) == "InvalidSHA256"


def test_binding_round_trips_through_compact_json() -> None:
    b = binding(identity())
    text = b.to_json()
    assert " " not in text and text.startswith('{"version":1,"attachmentID":')
    assert parse_binding(text) == b


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace('"version":1', '"version":2'), "UnsupportedVersion"),
        (lambda t: t.replace('"version":1', '"version":1.0'), "WrongType"),
        (lambda t: t.replace('"version":1', '"version":true'), "WrongType"),
        (lambda t: t.replace('"version":1,', '"version":1,"version":1,'), "DuplicateKey"),
        (lambda t: t.replace('"podUID"', '"PodUID"'), "UnknownField"),
        (lambda t: t.replace('"interface":"dra0",', ""), "MissingField"),
        (lambda t: t.replace('"interface":"dra0"', '"interface":0'), "WrongType"),
        (lambda t: t.replace('"nodeName":"worker-a"', '"nodeName":"Worker_A"'), "InvalidName"),
        (
            lambda t: t.replace('"pciAddress":"0000:03:00.1"', '"pciAddress":"0000:03:00.8"'),
            "InvalidPCIAddress",
        ),
        (lambda t: t.replace('"interface":"dra0"', '"interface":"d\\ud800"'), "InvalidEncoding"),
        (lambda t: t[:-1], "MalformedJSON"),
        (lambda t: t.replace('"version":1', '"version":NaN'), "MalformedJSON"),
        (lambda t: "[" + t + "]", "WrongType"),
    ],
)
def test_binding_rejections_have_stable_reasons(edit, expected) -> None:
    assert reason(parse_binding, edit(binding(identity()).to_json())) == expected


def test_binding_verifies_identity_and_config() -> None:
    ident = identity()
    b = binding(ident)
    b.verify_identity(ident)
    b.verify_config(b'{"type":"sriov"}')
    assert reason(b.verify_identity, identity(device="pf0vf2")) == "IdentityMismatch"
    assert reason(b.verify_config, b'{"type":"sriov"} ') == "ConfigHashMismatch"


def entry(ident: BindingIdentity, interface: str = "dra0") -> RegistryEntry:
    return RegistryEntry(
        ident.attachment_id(),
        ident.claim_uid,
        "ai-workloads",
        ident.shadow_name(),
        SHADOW_UID,
        interface,
        "0" * 64,
    )


def test_registry_round_trip_and_duplicates() -> None:
    a, b = identity(device="pf0vf1"), identity(device="pf0vf2")
    reg = Registry(1, POD, (entry(a), entry(b, "dra1")))
    assert parse_registry(reg.to_json()) == reg
    assert reason(Registry, 1, POD, (entry(a), entry(a, "dra1"))) == "DuplicateAttachmentID"
    assert reason(Registry, 1, POD, (entry(a), entry(b))) == "DuplicateInterface"
    other_ns = RegistryEntry(**(entry(b, "dra1")._asdict() | {"namespace": "other"}))
    assert reason(Registry, 1, POD, (entry(a), other_ns)) == "MixedNamespaces"
    wrong_name = entry(a)._asdict() | {"name": b.shadow_name()}
    assert reason(RegistryEntry, *wrong_name.values()) == "ShadowNameMismatch"


def test_selection_interface_limit_is_bytes() -> None:
    name = identity().shadow_name()
    assert SelectionElement(name, "ns", "é" * 7).to_dict()["interface"] == "é" * 7  # 14 bytes
    assert reason(SelectionElement, name, "ns", "é" * 8) == "InvalidInterfaceName"  # 16 bytes
    assert reason(SelectionElement, name, "ns", "dra\u00a0") == "InvalidInterfaceName"
    assert reason(SelectionElement, name, "ns", "..") == "InvalidInterfaceName"
    assert reason(SelectionElement, "rail-a-net", "ns", "dra0") == "InvalidShadowName"
    elem = SelectionElement(name, "ns", "dra0")
    assert parse_selection(elem.to_json()) == elem


def test_label_value() -> None:
    assert keys.label_value(POD) == POD
    assert reason(keys.label_value, "n" * 64) == "InvalidLabelValue"
    assert reason(keys.label_value, "") == "InvalidLabelValue"
    assert reason(keys.label_value, "-node") == "InvalidLabelValue"
    assert keys.label_value("a" * 63) == "a" * 63


def test_shadow_labels_use_uids_only() -> None:
    labels = keys.shadow_labels(POD, CLAIM, NODE)
    assert labels == {
        "sriovnetwork.k8snetworkplumbingwg.io/managed-by": "sriov-dra-driver",
        "sriovnetwork.k8snetworkplumbingwg.io/pod-uid": POD,
        "sriovnetwork.k8snetworkplumbingwg.io/claim-uid": CLAIM,
        "sriovnetwork.k8snetworkplumbingwg.io/node-uid": NODE,
    }
    assert reason(keys.shadow_labels, POD, CLAIM, "n" * 64) == "InvalidLabelValue"


def test_runtime_modules_import_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import sriov_contract.keys, sriov_contract.identity, sriov_contract.binding\n"
        "import sriov_contract.registry, sriov_contract.selection\n"
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    foreign = {
        m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names | {"sriov_contract", "sriov_lib"}
    }
    assert "sriov_contract.binding" in loaded
    assert foreign == set()
