"""json.loads / json.dumps for the CNI executable's start-up path, on the C accelerators alone.

Importing `json` costs every CNI process milliseconds: its decoder and encoder compile regular
expressions at import, which pulls in `re` and `enum`, and a thin DEL needs nothing else of
either. `_json` holds the C scanner and encoder that `json` itself runs, so a document that
decodes here decodes to exactly what `json.loads` returns (with the same hooks), and `dumps`
writes exactly what `json.dumps` writes. Whatever falls outside the fast path (a malformed
document, another text encoding, a type only the full encoder knows) is handed to the real
`json` module, so errors carry json's own exception and wording: only the cost changes.
"""

import _json

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
# json's spelling of what repr() writes as nan/inf (read off repr, so `math`, one more extension
# module for every CNI process to load, is not needed).
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


class _Context:
    """The attributes json.JSONDecoder hands the C scanner (json.loads' defaults unless given)."""

    strict = True
    object_hook = None

    def __init__(
        self,
        object_pairs_hook: "Callable[..., object] | None",
        parse_int: "Callable[[str], object] | None",
        parse_float: "Callable[[str], object] | None",
        parse_constant: "Callable[[str], object] | None",
    ) -> None:
        self.object_pairs_hook = object_pairs_hook
        # The scanner's own fast paths apply only to the int and float types themselves.
        self.parse_int = parse_int or int
        self.parse_float = parse_float or float
        self.parse_constant = parse_constant or _CONSTANTS.__getitem__
        self.memo: dict[str, str] = {}


_Hooks = tuple[object, object, object, object]
_scanners: "dict[_Hooks, Callable[[str, int], tuple[object, int]]]" = {}
_MAX_SCANNERS = 16  # hooks are module-level functions; never grow without bound on lambdas


def _scanner(hooks: _Hooks) -> "Callable[[str, int], tuple[object, int]]":
    scan = _scanners.get(hooks)
    if scan is None:
        scan = _json.make_scanner(_Context(*hooks))  # type: ignore[arg-type]
        if len(_scanners) < _MAX_SCANNERS:
            _scanners[hooks] = scan
    return scan


def loads(
    data: bytes | bytearray | str,
    *,
    object_pairs_hook: "Callable[[list[tuple[str, Any]]], object] | None" = None,
    parse_int: "Callable[[str], object] | None" = None,
    parse_float: "Callable[[str], object] | None" = None,
    parse_constant: "Callable[[str], object] | None" = None,
) -> "Any":
    """json.loads(data, **hooks): the same value, or the same exception json raises."""
    hooks = (object_pairs_hook, parse_int, parse_float, parse_constant)
    text: str | None = None
    if isinstance(data, str):
        text = data
    elif isinstance(data, bytes | bytearray) and not data.startswith(_BOMS) and b"\x00" not in data[:4]:
        text = data.decode("utf-8", "surrogatepass")  # json.loads' own decoding of UTF-8 input
    if text is not None:
        start = len(text) - len(text.lstrip(_WHITESPACE))
        try:
            value, end = _scanner(hooks)(text, start)
        except (StopIteration, ValueError, SystemError):
            # Malformed: json itself says how, below. (Before `json.decoder` is loaded, the C
            # scanner cannot build its JSONDecodeError and fails with a bare SystemError.)
            pass
        else:
            if end == len(text) or not text[end:].lstrip(_WHITESPACE):
                return value
    import json  # noqa: PLC0415 - only a malformed or unusual document pays for the full module

    return json.loads(
        data,
        object_pairs_hook=object_pairs_hook,
        parse_int=parse_int,
        parse_float=parse_float,
        parse_constant=parse_constant,
    )


class _Unusual(Exception):
    pass


def _unusual(value: object) -> object:
    raise _Unusual


# json's C quoting of one string as ASCII (what json.dumps(text) writes), for callers that
# serialise strings one at a time.
quote = _json.encode_basestring_ascii


def dumps(
    value: object,
    *,
    indent: int | None = None,
    ensure_ascii: bool = True,
    sort_keys: bool = False,
    separators: tuple[str, str] | None = None,
    default: "Callable[[Any], object] | None" = None,
) -> str:
    """json.dumps(value, ...) for these options: the same text, or the same exception (an
    exception of `default`'s own that is not a TypeError or ValueError passes straight through)."""
    try:
        if indent is None:
            item, key = separators or (", ", ": ")
            quoted = quote if ensure_ascii else _json.encode_basestring
            # json.dumps runs this same C encoder whenever indent is None (markers: its circular check).
            encode = _json.make_encoder(
                {}, default or _unusual, quoted, None, key, item, sort_keys, False, True
            )
            return "".join(encode(value, 0))
        if ensure_ascii and not sort_keys and separators is None and default is None:
            out: list[str] = []
            _encode(value, out, indent, 0)
            return "".join(out)
    except _Unusual:
        pass
    except (TypeError, ValueError, RecursionError):
        pass  # json raises it again, in its own words
    import json  # noqa: PLC0415 - a value or option only the full encoder handles

    return json.dumps(
        value,
        indent=indent,
        ensure_ascii=ensure_ascii,
        sort_keys=sort_keys,
        separators=separators,
        default=default,
    )


def _float(value: float) -> str:
    text = float.__repr__(value)
    return _NON_FINITE.get(text, text)


def _encode(value: object, out: list[str], indent: int, level: int) -> None:
    """json's pure-Python indenting encoder, for JSON-shaped values with string keys."""
    if isinstance(value, str):
        out.append(quote(value))
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
        pairs = [(quote(k) + ": ", v) for k, v in value.items()]
        _container(pairs, "{}", out, indent, level)
    elif isinstance(value, list | tuple):
        _container([("", v) for v in value], "[]", out, indent, level)
    else:
        raise _Unusual


def _container(
    pairs: list[tuple[str, object]], brackets: str, out: list[str], indent: int, level: int
) -> None:
    """An object (each pair's prefix is its encoded key) or an array (empty prefixes)."""
    if not pairs:
        out.append(brackets)
        return
    inner = "\n" + " " * (indent * (level + 1))
    out.append(brackets[0] + inner)
    for i, (prefix, item) in enumerate(pairs):
        if i:
            out.append("," + inner)
        out.append(prefix)
        _encode(item, out, indent, level + 1)
    out.append("\n" + " " * (indent * level) + brackets[1])
