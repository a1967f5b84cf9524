"""The value-syntax validators, checked against the rules fixtures/README.md publishes as regular
expressions (section 5): the code spells each rule out by hand, the test reads the pattern from
the contract's own text and compares the two on generated, mutated and arbitrary strings."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sriov_contract import names, selection
from sriov_contract.errors import ContractError

README = Path(__file__).resolve().parents[3] / "fixtures" / "README.md"
# Bound __call__: mypy does not see a NamedTuple instance with __call__ as a Callable.
VALIDATORS: dict[str, Callable[[str], str]] = {
    "UID": names.validate_uid.__call__,
    "SHA-256": names.validate_sha256.__call__,
    "DNS label": names.validate_dns_label.__call__,
    "DNS subdomain": names.validate_dns_subdomain.__call__,
    "PCI address": names.validate_pci_address.__call__,
    "resourceVersion": names.validate_resource_version.__call__,
    "shadow name": selection.validate_shadow_name,
}
# The one rule whose table row bounds the length in words rather than in the pattern.
LENGTH_BOUND = {"DNS subdomain": names.DNS_SUBDOMAIN_MAX}


def published_rules() -> dict[str, re.Pattern[str]]:
    rules = {}
    for line in README.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in VALIDATORS:
            found = re.search(r"`\^(.*?)\$`", cells[1])
            assert found, f"no pattern in the {cells[0]} row"
            rules[cells[0]] = re.compile(found.group(1), re.DOTALL)
    return rules


RULES = published_rules()


def test_every_validator_has_its_published_rule() -> None:
    assert set(RULES) == set(VALIDATORS)


def _accepts(rule: str, text: str) -> bool:
    try:
        return VALIDATORS[rule](text) == text
    except ContractError as exc:
        assert exc.reason  # every refusal carries its stable reason
        return False


def _published(rule: str, text: str) -> bool:
    return RULES[rule].fullmatch(text) is not None and len(text) <= LENGTH_BOUND.get(rule, len(text))


_EDITS = "0123456789abcdefgzA-.:_ \n\x00é"


@st.composite
def candidates(draw: st.DrawFn, rule: str) -> str:
    """Valid strings, the same with a few edits (replace, insert, delete), and anything at all."""
    text = draw(st.one_of(st.from_regex(RULES[rule], fullmatch=True), st.text(max_size=80)))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.sampled_from(("replace", "insert", "delete")))
        char = draw(st.sampled_from(_EDITS))
        if edit == "insert":
            text = text[:at] + char + text[at:]
        elif edit == "replace":
            text = text[:at] + char + text[at + 1 :]
        else:
            text = text[:at] + text[at + 1 :]
    return text


@pytest.mark.parametrize("rule", sorted(VALIDATORS))
def test_each_validator_accepts_exactly_its_published_rule(rule: str) -> None:
    @settings(max_examples=600, deadline=None)
    @given(candidates(rule))
    def check(text: str) -> None:
        assert _accepts(rule, text) == _published(rule, text), text

    check()


@pytest.mark.parametrize(
    ("rule", "text", "valid"),
    [
        ("DNS subdomain", ".".join(["a" * 63] * 4)[:253], True),
        ("DNS subdomain", ".".join(["a" * 63] * 4)[:252] + "ab", False),  # 254 characters
        ("DNS subdomain", "a..b", False),
        ("DNS label", "a" * 63, True),
        ("DNS label", "a" * 64, False),
        ("UID", "0123abcd-0123-4567-89ab-0123456789ab\n", False),
        ("PCI address", "0000:3b:1f.7", True),
        ("PCI address", "0000:3b:2f.0", False),
        ("resourceVersion", "~" * 128, True),
        ("resourceVersion", "~" * 129, False),
    ],
)
def test_the_boundaries(rule: str, text: str, valid: bool) -> None:
    assert _accepts(rule, text) is valid is _published(rule, text)
