"""Shared pytest wiring: every module in tests/support/ is loaded as a fixture plugin.

Each support module owns one concept (test bed, CNI network namespaces, fake SR-IOV node, ...),
so adding fixtures never means editing this file.
"""

from pathlib import Path

pytest_plugins = sorted(
    f"tests.support.{p.stem}"
    for p in (Path(__file__).parent / "support").glob("*.py")
    if p.stem != "__init__"
)
