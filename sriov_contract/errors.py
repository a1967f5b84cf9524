"""The one error type every component raises for bad input or refused operations.

A reason is a stable CamelCase code that operators, events, metrics and tests match on; the
message names the object involved and says what to do. Subclasses only add grouping, never
change the reason contract.
"""

# Spelled out instead of imported: the thick shim's forward path imports this module, and
# `typing` alone costs milliseconds on every start.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any


class ReasonedError(Exception):
    """An error with a stable machine-readable reason and an actionable human message."""

    def __init__(self, reason: str, message: str, **details: "Any") -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.details = details

    def __reduce__(self) -> "tuple[Any, ...]":
        return (_rebuild, (type(self), self.reason, self.message, self.details))


def _rebuild(
    cls: "type[ReasonedError]", reason: str, message: str, details: "dict[str, Any]"
) -> "ReasonedError":
    err = cls.__new__(cls)
    ReasonedError.__init__(err, reason, message, **details)
    return err


class ContractError(ReasonedError):
    """A binding, registry, selection or identity document violates the version-1 contract."""
