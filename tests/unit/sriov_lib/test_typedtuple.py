"""sriov_lib.typedtuple: typing.NamedTuple's class syntax and behaviour, built without `typing`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from sriov_lib.typedtuple import TypedTuple


class Point(TypedTuple):
    """A point."""

    x: int
    y: int = 0

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


class TypedPoint(NamedTuple):
    """A point."""

    x: int
    y: int = 0


class Positive(TypedTuple):
    value: int
    label: str = ""

    def __post_init__(self) -> None:
        if self.value <= 0:
            raise ValueError(f"{self.value} is not positive")


def test_a_record_behaves_as_the_same_typing_named_tuple() -> None:
    p, t = Point(1, 2), TypedPoint(1, 2)
    assert p._fields == t._fields == ("x", "y")
    assert p._field_defaults == t._field_defaults == {"y": 0}
    assert repr(p) == "Point(x=1, y=2)" and repr(t) == "TypedPoint(x=1, y=2)"
    assert Point.__doc__ == TypedPoint.__doc__ == "A point."
    assert Point.__module__ == __name__ and Point.__qualname__ == "Point"
    assert tuple(p) == tuple(t) == (1, 2)
    assert hash(p) == hash(t)
    assert p._replace(y=5) == Point(1, 5) and p._asdict() == {"x": 1, "y": 2}
    assert Point(3).norm1() == 3
    with pytest.raises(AttributeError):
        p.x = 3  # type: ignore[misc]


def test_post_init_checks_every_construction() -> None:
    assert Positive(1) == (1, "")
    for build in (
        lambda: Positive(0),
        lambda: Positive(1)._replace(value=-1),
        lambda: Positive._make([0, ""]),
    ):
        with pytest.raises(ValueError, match="is not positive"):
            build()


def test_a_field_without_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows"):
        type(
            "Bad",
            (TypedTuple,),
            {"__module__": __name__, "__annotations__": {"a": "int", "b": "int"}, "a": 1},
        )


def test_defining_records_imports_neither_typing_nor_dataclasses() -> None:
    probe = (
        "import sys\n"
        "from sriov_lib.typedtuple import TypedTuple\n"
        "class P(TypedTuple):\n    x: int\n"
        "print(sorted(m for m in ('typing', 'dataclasses') if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "[]"
