"""Typed immutable records for modules on the CNI executable's start-up path.

A thin CNI invocation is a fresh interpreter, and it imports this package and the shim's core
every time. There `typing` costs about 3 ms and `dataclasses` about 8 ms (it imports `inspect`),
more than reading the Pod and its NADs. Type checkers see `typing.NamedTuple`; at run time the
same class syntax builds the `collections.namedtuple` that `typing.NamedTuple` would build,
keeping the body's methods, properties and docstring, so both behave alike. As with
`typing.NamedTuple`, a method cannot use zero-argument `super()`.

One addition, as in a dataclass: a `__post_init__(self)` in the body runs after every
construction (`_make` and `_replace` included), so a record that validates its fields there
cannot exist with invalid ones.
"""

from __future__ import annotations

TYPE_CHECKING = False  # spelled out: importing it from typing is the cost this module avoids

if TYPE_CHECKING:
    from typing import NamedTuple as TypedTuple
else:
    from collections import namedtuple

    # Set by namedtuple itself; the class body's own entries are everything else.
    _GENERATED = frozenset({"__module__", "__annotations__", "__slots__", "__orig_bases__"})

    class _RecordType(type):
        def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, object]) -> type:
            if not bases:
                return super().__new__(mcs, name, bases, namespace)
            annotations = namespace.get("__annotations__", {})
            assert isinstance(annotations, dict)
            fields = tuple(annotations)
            defaulted = tuple(f for f in fields if f in namespace)
            if fields[len(fields) - len(defaulted) :] != defaulted:
                raise TypeError(f"{name}: a field without a default follows one with a default")
            record = namedtuple(
                name,
                fields,
                defaults=[namespace[f] for f in defaulted],
                module=str(namespace["__module__"]),
            )
            record.__annotations__ = dict(annotations)
            for key, value in namespace.items():
                if key not in fields and key not in _GENERATED:
                    setattr(record, key, value)
            if "__post_init__" in namespace:
                _checked(record)
            return record

    def _checked(record: type) -> None:
        build = record.__new__

        def checked(cls: type, *args: object, **kwargs: object) -> object:
            made = build(cls, *args, **kwargs)
            made.__post_init__()
            return made

        record.__new__ = checked
        # namedtuple's _make (and so _replace) builds with tuple.__new__, past the check.
        record._make = classmethod(lambda cls, iterable: cls(*iterable))

    class TypedTuple(metaclass=_RecordType):
        """Base of a typed record: `class Point(TypedTuple): x: int; y: int = 0`."""

        __slots__ = ()


__all__ = ["TypedTuple"]
