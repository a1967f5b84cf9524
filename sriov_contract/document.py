"""Strict decoding of contract JSON documents, in the check order fixtures/README.md fixes.

Order matters because every implementation must report the same reason for the same bytes:
syntax, text encoding, duplicate keys, top-level type, version, unknown fields, missing fields,
then each field's type and value in the document's declared field order.
"""

from __future__ import annotations

from sriov_contract import reasons
from sriov_contract.errors import ContractError
from sriov_lib import quickjson, rawjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any, Final

    JSONObject = dict[str, Any]


# Contract documents nest three levels deep; a hostile annotation must not exhaust the stack or
# depend on each parser's own recursion limit.
MAX_DEPTH: Final = 32


def _walk(value: Any, what: str) -> list[Any]:
    """Every value, key and container in document order; too deep a nesting is MalformedJSON."""
    out: list[Any] = []
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        out.append(item)
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise ContractError(
                reasons.MALFORMED_JSON, f"{what} nests deeper than {MAX_DEPTH} levels", document=what
            )
        children = [x for kv in item.items() for x in kv] if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in reversed(children))
    return out


def load_object(text: str, what: str) -> JSONObject:
    """Decode `text` as one JSON object, rejecting anything two decoders could read differently."""
    try:
        value = rawjson.loads(text)
    except (rawjson.RawJsonError, RecursionError) as exc:
        raise ContractError(
            reasons.MALFORMED_JSON, f"{what} is not valid JSON: {exc}", document=what
        ) from exc
    walked = _walk(value, what)
    if any(isinstance(v, str) and rawjson.has_surrogate(v) for v in walked):
        raise ContractError(
            reasons.INVALID_ENCODING,
            f"{what} contains an unpaired UTF-16 surrogate escape; write valid Unicode text",
            document=what,
        )
    for v in walked:
        if isinstance(v, rawjson.JsonObject) and v.duplicate_keys:
            key = next(k for k in v if k in v.duplicate_keys)
            raise ContractError(
                reasons.DUPLICATE_KEY,
                f"{what} repeats key {key!r}; decoders disagree on which copy wins, so the document "
                "is refused",
                document=what,
                key=key,
            )
    if not isinstance(value, dict):
        raise ContractError(reasons.WRONG_TYPE, f"{what} must be a JSON object", document=what)
    return value


def check_version(obj: JSONObject, what: str, field: str, supported: int) -> None:
    """Check the version before the shape: a future version may have different fields."""
    if field not in obj:
        raise ContractError(reasons.MISSING_FIELD, f"{what} has no {field!r}", document=what, field=field)
    version = obj[field]
    # Compared as the integer token's text, so 1.0, 1e0 and huge integers behave alike everywhere.
    if not isinstance(version, rawjson.RawNumber) or not version.is_integer():
        raise ContractError(reasons.WRONG_TYPE, f"{what} field {field!r} must be an integer", document=what)
    if version.text != str(supported):
        raise _unsupported(what, field, version.text, supported)


def require_version(version: int, what: str, field: str, supported: int) -> None:
    if isinstance(version, bool) or version != supported:
        raise _unsupported(what, field, repr(version), supported)


def _unsupported(what: str, field: str, version: str, supported: int) -> ContractError:
    return ContractError(
        reasons.UNSUPPORTED_VERSION,
        f"{what} has {field} {version}; this build understands only {supported}: "
        "upgrade the reader or drain the writer",
        document=what,
        version=version,
    )


def check_fields(obj: JSONObject, what: str, fields: tuple[str, ...]) -> None:
    """Every field of `fields` is present and nothing else is, compared case-sensitively."""
    for key in obj:
        if key not in fields:
            raise ContractError(
                reasons.UNKNOWN_FIELD, f"{what} has unknown field {key!r}", document=what, field=key
            )
    for key in fields:
        if key not in obj:
            raise ContractError(reasons.MISSING_FIELD, f"{what} has no {key!r}", document=what, field=key)


def _typed(obj: JSONObject, key: str, what: str, kind: type, label: str) -> Any:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ContractError(
            reasons.WRONG_TYPE, f"{what} field {key!r} must be {label}", document=what, field=key
        )
    return value


def get_str(obj: JSONObject, key: str, what: str) -> str:
    value: str = _typed(obj, key, what, str, "a string")
    return value


def get_object(obj: JSONObject, key: str, what: str) -> JSONObject:
    value: JSONObject = _typed(obj, key, what, dict, "an object")
    return value


def get_list(obj: JSONObject, key: str, what: str) -> list[Any]:
    value: list[Any] = _typed(obj, key, what, list, "an array")
    return value


def compact(fields: JSONObject) -> str:
    """The canonical compact form: fixed field order, no spaces, non-ASCII as UTF-8, no HTML escapes."""
    return quickjson.dumps(fields, ensure_ascii=False, separators=(",", ":"))
