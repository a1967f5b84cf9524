"""Writes docs/reasons.md from the reason catalogues (or, with --check, says whether it is current).

The catalogues are sriov_contract.reasons (shared), sriov_dra.reasons (driver) and
cni_shim.reasons (CNI shim); each one's MEANINGS gives a reason's meaning and what to do.
tests/unit/test_reason_catalogue.py fails when the committed file differs from render().

    .venv/bin/python scripts/gen_reasons.py          # rewrite docs/reasons.md
    .venv/bin/python scripts/gen_reasons.py --check  # exit 1 when it is stale
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "reasons.md"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cni_shim import reasons as cni_reasons  # noqa: E402
from sriov_contract import reasons as contract_reasons  # noqa: E402
from sriov_dra import reasons as driver_reasons  # noqa: E402

SECTIONS: tuple[tuple[str, str, ModuleType], ...] = (
    (
        "Contract (shared)",
        "Raised by `sriov_contract` on both sides: decoding and checking the binding, registry, "
        "identity and selection documents, and the syntax rules of fixtures/README.md.",
        contract_reasons,
    ),
    (
        "Driver (`sriov_dra`)",
        "Start a kubelet prepare/unprepare error, an Event's reason and the `reason` label of "
        "`sriov_dra_failures_total`; the CLI's errors too.",
        driver_reasons,
    ),
    (
        "CNI shim (`cni_shim`)",
        "Start the `details` of the CNI error JSON (`<Reason>` or `<Reason>: <details>`) and name the "
        "failure in the shim's error log line; the `msg` is Multus's wording where Multus has one.",
        cni_reasons,
    ),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def constants(module: ModuleType) -> dict[str, str]:
    """Reason -> the name of the catalogue constant that holds it: what the code raises."""
    meanings: dict[str, tuple[str, str]] = module.MEANINGS
    return {
        value: name
        for name, value in vars(module).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str) and value in meanings
    }


def render() -> str:
    out = [
        "# Reasons",
        "",
        "Every stable reason code an error can carry, generated from the catalogues by "
        "`scripts/gen_reasons.py`; do not edit by hand.",
        "",
        "The code never spells a reason out: it raises the catalogue constant in the second column. "
        "`grep -rnw REASON_CONSTANT sriov_dra cni_shim sriov_contract`, with that constant in place "
        "of `REASON_CONSTANT`, lists the line that defines it and every line that raises it.",
        "",
    ]
    for title, intro, module in SECTIONS:
        meanings: dict[str, tuple[str, str]] = module.MEANINGS
        names = constants(module)
        out += [
            f"## {title}",
            "",
            f"{intro} Constants of `{module.__name__}`.",
            "",
            "| reason | constant | meaning | what to do |",
            "| --- | --- | --- | --- |",
        ]
        out += [
            f"| `{reason}` | `{names[reason]}` | {_cell(meaning)} | {_cell(action)} |"
            for reason, (meaning, action) in sorted(meanings.items())
        ]
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if argv == ["--check"]:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run scripts/gen_reasons.py", file=sys.stderr)
            return 1
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
