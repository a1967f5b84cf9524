"""The compat suite's own bookkeeping, checked without the test bed: every DELIBERATE entry is in
docs/compatibility.md, every KNOWN entry names a case that runs in that mode, and
the Multus-derived cases number at least the 60 issue #18 asks for."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.compat.cases import BY_ID, CASES, DELIBERATE, ISSUE, KNOWN

PAGE = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"


def _section() -> str:
    text = PAGE.read_text()
    start = text.index("## Deliberate differences")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def test_the_compatibility_page_lists_every_deliberate_entry() -> None:
    section = _section()
    missing = [case_id for case_id in DELIBERATE if f"`{case_id}`" not in section]
    assert not missing, f"docs/compatibility.md 'Deliberate differences' does not list {missing}"


def test_tables_name_real_cases_and_modes() -> None:
    assert set(DELIBERATE) <= set(BY_ID)
    stale = [
        (case_id, mode) for case_id, mode in KNOWN if case_id not in BY_ID or mode not in BY_ID[case_id].modes
    ]
    assert not stale
    assert not set(DELIBERATE) & {case_id for case_id, _ in KNOWN}


def test_enough_cases_from_multus_tests() -> None:
    per_file = Counter(c.source for c in CASES if c.source != ISSUE)
    assert sum(per_file.values()) >= 60, per_file
    assert len({c.id for c in CASES}) == len(CASES)
