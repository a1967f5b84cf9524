"""The fault matrix's table: cells recorded by tests/faults, printed at the end of the session.

- ``fault_matrix`` (session): a ``FaultMatrix``; ``.record(table, row, column, verdict, detail="")``
  with verdict PASS, FAIL or N/A, and ``.full`` is True when the run selected ``-m faults`` (then
  every cell runs; otherwise only the fast subset does and the rest print as ``-``).

The table and its counts go to the terminal summary, so ``make faults`` ends with the matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

PASS = "PASS"
FAIL = "FAIL"
NA = "N/A"
NOT_RUN = "-"


@dataclass
class Table:
    rows: Sequence[str]
    columns: Sequence[str]
    cells: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)

    def render(self, title: str) -> list[str]:
        width = max(len(r) for r in self.rows) + 2
        col = max(6, *(len(c) + 2 for c in self.columns))
        lines = [title, " " * width + "".join(c.ljust(col) for c in self.columns)]
        for row in self.rows:
            verdicts = [self.cells.get((row, c), (NOT_RUN, ""))[0] for c in self.columns]
            lines.append(row.ljust(width) + "".join(v.ljust(col) for v in verdicts))
        counts = {v: 0 for v in (PASS, FAIL, NA, NOT_RUN)}
        for row in self.rows:
            for c in self.columns:
                counts[self.cells.get((row, c), (NOT_RUN, ""))[0]] += 1
        lines.append(
            f"PASS {counts[PASS]}  FAIL {counts[FAIL]}  N/A {counts[NA]}  not run in this subset {counts[NOT_RUN]}"
        )
        lines += [f"  FAIL {r} x {c}: {d}" for (r, c), (v, d) in sorted(self.cells.items()) if v == FAIL]
        return lines


class FaultMatrix:
    def __init__(self, full: bool) -> None:
        self.full = full
        self.tables: dict[str, Table] = {}

    def table(self, title: str, rows: Sequence[str], columns: Sequence[str]) -> Table:
        return self.tables.setdefault(title, Table(rows, columns))

    def record(self, title: str, row: str, column: str, verdict: str, detail: str = "") -> None:
        self.tables[title].cells[(row, column)] = (verdict, detail)


_KEY = pytest.StashKey[FaultMatrix]()


def _matrix(config: pytest.Config) -> FaultMatrix:
    if _KEY not in config.stash:
        config.stash[_KEY] = FaultMatrix("faults" in (config.getoption("markexpr", "") or ""))
    return config.stash[_KEY]


@pytest.fixture(scope="session")
def fault_matrix(pytestconfig: pytest.Config) -> FaultMatrix:
    return _matrix(pytestconfig)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    matrix = config.stash.get(_KEY, None)
    if matrix is None or not matrix.tables:
        return
    terminalreporter.section("fault matrix")
    for title, table in matrix.tables.items():
        for line in table.render(title):
            terminalreporter.write_line(line)
        terminalreporter.write_line("")
