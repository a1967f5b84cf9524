"""What a scenario run reports: a row per interface of the Pod, the checks with their verdicts
(PASS, FAIL, SKIP), and how to print both, as ``make demo`` does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from testbed.kubelets import REAL

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass(frozen=True)
class Row:
    request: str
    gpu: str
    vf_pci: str
    pcie_root: str
    rail: str
    source_nad: str
    shadow_nad: str
    interface: str
    ip: str
    # The RDMA device network-status names for the interface (its device-info); "-" for none.
    rdma: str = "-"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str = ""


def check(name: str, ok: bool, detail: str = "") -> Check:
    return Check(name, PASS if ok else FAIL, detail)


@dataclass
class Result:
    scenario: str
    cni_mode: str
    kubelet: str = REAL
    install: str = "processes"  # or as the kubelet runs it, from deploy/base/ or the chart
    rows: list[Row] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    after_teardown: list[Check] = field(default_factory=list)
    after_stop: list[Check] = field(default_factory=list)  # after the whole stack went down
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in [*self.checks, *self.after_teardown, *self.after_stop])

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


COLUMNS = (
    "request",
    "GPU",
    "VF PCI",
    "pcieRoot",
    "rail",
    "source NAD",
    "shadow NAD",
    "interface",
    "IP",
    "RDMA",
)


def render_table(rows: Sequence[Row]) -> str:
    cells = [COLUMNS, *(tuple(str(v) for v in asdict(r).values()) for r in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_checks(checks: Sequence[Check]) -> str:
    return "\n".join(
        f"  {c.status:<4}  {c.name}" + (f"\n        {c.detail}" if c.detail else "") for c in checks
    )
