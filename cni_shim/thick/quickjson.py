"""json.loads / json.dumps for the thick shim's start-up path, on the C accelerators alone.

Importing `json` costs a shim process about 11 ms (its decoder and encoder compile regular
expressions at import, which pulls in `re` and `enum`); the forward path needs only to read two
small documents and write two. `_json` offers the same C scanner and string encoder `json`
itself uses, so the results are identical: `loads` accepts and rejects exactly what `json.loads`
does for UTF-8 text, and `dumps` writes exactly what `json.dumps` (optionally `indent=4`) writes
for JSON-shaped values. Anything outside that envelope (other text encodings, non-string keys,
non-JSON types) is handed to the real `json` module, so nothing changes except the cost.
"""

from __future__ import annotations

import _json

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
# json's spelling of what repr() writes as nan/inf (read off repr, so `math`, one more extension
# module for every shim process to load, is not needed).
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


class _Context:
    """The attributes json.JSONDecoder hands the C scanner, with json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: dict[str, str] = {}


_scan = _json.make_scanner(_Context())  # type: ignore[arg-type]


def loads(data: bytes | str) -> object:
    """json.loads; raises ValueError (or RecursionError) exactly when it would."""
    if isinstance(data, bytes):
        if data.startswith(_BOMS) or b"\x00" in data[:4]:
            import json  # noqa: PLC0415 - another encoding: json.loads detects it

            return json.loads(data)
        text = data.decode("utf-8", "surrogatepass")
    else:
        text = data
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError(f"Expecting value at char {start}") from None
    if len(text[end:].lstrip(_WHITESPACE)) != 0:
        raise ValueError(f"Extra data at char {end}")
    return value


def dumps(value: object, *, indent: int | None = None) -> str:
    """json.dumps(value) or json.dumps(value, indent=indent)."""
    out: list[str] = []
    try:
        _encode(value, out, indent, 0)
    except _Unusual:
        import json  # noqa: PLC0415 - a value only the full encoder knows how to write

        return json.dumps(value, indent=indent)
    return "".join(out)


class _Unusual(Exception):
    pass


def _float(value: float) -> str:
    text = float.__repr__(value)
    return _NON_FINITE.get(text, text)


def _encode(value: object, out: list[str], indent: int | None, level: int) -> None:
    if isinstance(value, str):
        out.append(_json.encode_basestring_ascii(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_float(value))
    elif isinstance(value, dict):
        if any(not isinstance(k, str) for k in value):
            raise _Unusual
        pairs = [(_json.encode_basestring_ascii(k) + ": ", v) for k, v in value.items()]
        _container(pairs, "{}", out, indent=indent, level=level)
    elif isinstance(value, list | tuple):
        _container([("", v) for v in value], "[]", out, indent=indent, level=level)
    else:
        raise _Unusual


def _container(
    pairs: list[tuple[str, object]], brackets: str, out: list[str], *, indent: int | None, level: int
) -> None:
    """An object (each pair's prefix is its encoded key) or an array (empty prefixes)."""
    if not pairs:
        out.append(brackets)
        return
    # json.dumps: ", " between items without indent; with it, "," and a newline at each level.
    inner = "" if indent is None else "\n" + " " * (indent * (level + 1))
    out.append(brackets[0] + inner)
    for i, (prefix, item) in enumerate(pairs):
        if i:
            out.append(", " if indent is None else "," + inner)
        out.append(prefix)
        _encode(item, out, indent, level + 1)
    out.append(("" if indent is None else "\n" + " " * (indent * level)) + brackets[1])
