"""The thick-mode shim: forward one CNI request to cni-shim-daemon over its unix socket.

Standard library only and on the executable's hot path, so HTTP is spoken by hand (one request
per connection, the daemon closes it) instead of through `http.client`, whose `email` import
alone costs more than the whole round trip; for the same reason the C-level `_socket` and
`sriov_lib.quickjson` stand in for `socket` and `json` (each about 10 ms to import), and
nothing this path loads imports `os` or uses `from __future__ import annotations` (together
1.3 ms of every forwarded invocation: its annotations are written to be evaluated instead).
The wire shape is Multus's `/cni` API: a JSON body
`{"env": {...}, "config": "<base64 stdin>"}`, answered 200 `{"Result": {...}}` (or an empty body),
or 400 with CNI error JSON; 503 means the daemon is not ready and ran nothing. As Multus's shim
does, the result is printed in this config's cniVersion and a failed ADD/CHECK's msg is put
behind `CmdAdd (shim): CNI request failed with status 400: '...': StdinData: ...`.

The request goes out at once: a daemon that is not serving (no socket, refused) or not ready
(503) has done nothing, so the shim then waits on /readyz and sends it again. Asking /readyz
first instead would cost every request a second connection and daemon thread.
"""

import _socket
import time

from cni_shim import reasons
from sriov_lib import quickjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.errors import CniError

SOCKET_NAME = "cni-shim.sock"
NOT_READY = 503
DEFAULT_READY_TIMEOUT = 30.0
DEFAULT_REQUEST_TIMEOUT = 200.0
READY_INTERVAL = 0.1
_MAX_ANSWER = 16 * 1024 * 1024
# Multus's shim keys, plus our two time budgets; matched case-insensitively as Go decodes them.
_SOCKET_DIR_KEY = "daemonsocketdir"
_READY_KEY = "daemonreadytimeout"
_REQUEST_KEY = "daemonrequesttimeout"
# A config for Multus's own shim type (as a generated 00-multus.conf is) without daemonSocketDir
# means the Multus shim's default directory.
MULTUS_SHIM_TYPE = "multus-shim"
MULTUS_SOCKET_DIR = "/run/multus/"


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def base64(data: bytes) -> str:
    """Standard base64 with padding, as `binascii.b2a_base64(data, newline=False)`.

    Written out because `binascii` is one more extension module to load on every invocation,
    which costs more than encoding a CNI config (a few hundred bytes) here."""
    digits = _B64
    out = []
    whole = len(data) - len(data) % 3
    for i in range(0, whole, 3):
        group = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2]
        out.append(
            digits[group >> 18] + digits[(group >> 12) & 63] + digits[(group >> 6) & 63] + digits[group & 63]
        )
    rest = len(data) - whole
    if rest:
        group = (data[whole] << 16) | ((data[whole + 1] << 8) if rest == 2 else 0)
        tail = digits[group >> 18] + digits[(group >> 12) & 63] + digits[(group >> 6) & 63]
        out.append(tail[: rest + 1] + "=" * (3 - rest))
    return "".join(out)


class NotServing(OSError):
    """Nothing accepted the connection, so the daemon saw nothing of the request."""


class Target:
    """Where and how patiently to reach the daemon, from the shim's own config."""

    def __init__(
        self, socket_dir: str, ready_timeout: float, request_timeout: float, cni_version: str = ""
    ) -> None:
        # os.path.join's result, without loading `os` into the shim for one join.
        self.path = socket_dir + SOCKET_NAME if socket_dir.endswith("/") else f"{socket_dir}/{SOCKET_NAME}"
        self.ready_timeout = ready_timeout
        self.request_timeout = request_timeout
        self.cni_version = cni_version


def _seconds(value: object, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return default
    return float(value)


def target(stdin: bytes) -> "Target | None":
    """The daemon to forward to, or None for thin mode (no daemonSocketDir in the config, and not
    Multus's `multus-shim` type, whose default is /run/multus/)."""
    lowered = stdin.lower()
    if b"aemonsocketdir" not in lowered and b"multus-shim" not in lowered:
        return None
    try:
        raw = quickjson.loads(stdin)
    except (ValueError, RecursionError):
        return None  # thin mode reports the malformed config exactly as it always does
    if not isinstance(raw, dict):
        return None
    keys = {str(k).lower(): v for k, v in raw.items()}
    socket_dir = keys.get(_SOCKET_DIR_KEY)
    if socket_dir is None and keys.get("type") == MULTUS_SHIM_TYPE:
        socket_dir = MULTUS_SOCKET_DIR
    if not isinstance(socket_dir, str) or not socket_dir:
        return None
    return Target(
        socket_dir,
        _seconds(keys.get(_READY_KEY), DEFAULT_READY_TIMEOUT),
        _seconds(keys.get(_REQUEST_KEY), DEFAULT_REQUEST_TIMEOUT),
        version if isinstance(version := raw.get("cniVersion"), str) else "",
    )


def run(env: dict[str, str], stdin: bytes, where: "Target") -> tuple[int, str, str]:
    """The whole thick-mode invocation: (exit status, stdout, stderr), rendered as thin mode renders."""
    try:
        result = forward(env, stdin, where)
        if result is not None and where.cni_version and result.get("cniVersion") != where.cni_version:
            result = _in_version(result, where.cni_version)
    except Exception as exc:  # the runtime must get CNI error JSON, never a traceback
        # The error classes load only here: a forwarded request that succeeds never needs them.
        from cni_shim.errors import CniError  # noqa: PLC0415

        err = exc if isinstance(exc, CniError) else _internal(exc)
        return 1, quickjson.dumps(err.to_json(where.cni_version), indent=4), ""
    return 0, quickjson.dumps(result, indent=4) if result is not None else "", ""


def _in_version(result: dict[str, object], version: str) -> dict[str, object]:
    """The daemon answers in its own cniVersion; Multus's shim prints the result in its config's."""
    from cni_shim.core import results  # noqa: PLC0415 - only a version mismatch pays for it

    return results.convert(results.to_current(result, ""), version)


def _internal(exc: Exception) -> "CniError":
    from cni_shim.errors import CniError  # noqa: PLC0415 - failures only

    return CniError(reasons.INTERNAL_ERROR, f"cni-shim failed unexpectedly: {type(exc).__name__}: {exc}")


def _unavailable(where: "Target", why: str) -> "CniError":
    from cni_shim.errors import TRY_AGAIN_LATER, CniError  # noqa: PLC0415 - failures only

    return CniError(
        reasons.DAEMON_UNAVAILABLE,
        f"cni-shim-daemon is not serving {where.path}: {why}; check the cni-shim-daemon Pod on this node",
        TRY_AGAIN_LATER,
    )


def exchange(path: str, method: str, endpoint: str, body: bytes, timeout: float) -> tuple[int, bytes]:
    """One HTTP/1.1 request on a fresh unix-socket connection; returns (status, body)."""
    head = (
        f"{method} {endpoint} HTTP/1.1\r\nHost: cni-shim-daemon\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError as exc:
            raise NotServing(exc.errno, exc.strerror or str(exc)) from exc
        sock.sendall(head + body)
        chunks = []
        size = 0
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > _MAX_ANSWER:
                raise OSError(f"answer larger than {_MAX_ANSWER} bytes")
    finally:
        sock.close()
    answer = b"".join(chunks)
    header, sep, payload = answer.partition(b"\r\n\r\n")
    parts = header.split(b" ", 2)
    if not sep or len(parts) < 2 or not parts[1].isdigit():
        raise OSError(f"not an HTTP answer: {answer[:200]!r}")
    return int(parts[1]), payload


def _wait_ready(where: "Target", deadline: float) -> None:
    while True:
        try:
            status, _ = exchange(where.path, "GET", "/readyz", b"", READY_INTERVAL * 10)
            if status == 200:
                return
            why = f"/readyz answered {status} (shutting down)"
        except OSError as exc:
            why = exc.strerror or str(exc)
        if time.monotonic() + READY_INTERVAL > deadline:
            raise _unavailable(where, f"not ready within {where.ready_timeout:g}s ({why})")
        time.sleep(READY_INTERVAL)


def forward(env: dict[str, str], stdin: bytes, where: "Target") -> dict[str, object] | None:
    """Send the request; returns the ADD result (None for other verbs) or raises the daemon's CniError."""
    body = quickjson.dumps({"env": env, "config": base64(stdin)}).encode()
    deadline = time.monotonic() + where.ready_timeout
    while True:
        try:
            status, payload = _post(where, body)
        except NotServing as exc:
            status, why = NOT_READY, exc.strerror or str(exc)
        else:
            why = f"/cni answered {status} (not ready)"
        if status != NOT_READY:
            return _answer(status, payload, env.get("CNI_COMMAND", ""), stdin)
        if time.monotonic() + READY_INTERVAL > deadline:
            raise _unavailable(where, f"not ready within {where.ready_timeout:g}s ({why})")
        _wait_ready(where, deadline)


def _post(where: "Target", body: bytes) -> tuple[int, bytes]:
    try:
        return exchange(where.path, "POST", "/cni", body, where.request_timeout)
    except NotServing:
        raise
    except TimeoutError as exc:
        from cni_shim.errors import TRY_AGAIN_LATER, CniError  # noqa: PLC0415 - failures only

        raise CniError(
            reasons.DAEMON_TIMEOUT,
            f"cni-shim-daemon did not answer within {where.request_timeout:g}s on {where.path}; "
            "the request may still complete there, the runtime will retry",
            TRY_AGAIN_LATER,
        ) from exc
    except OSError as exc:
        raise _unavailable(where, f"the request was cut off ({exc.strerror or exc})") from exc


def _answer(status: int, payload: bytes, command: str, stdin: bytes) -> dict[str, object] | None:
    try:
        doc = quickjson.loads(payload) if payload.strip() else None
    except ValueError:
        doc = None
    if status == 200:
        if doc is None:
            return None
        if isinstance(doc, dict) and isinstance(doc.get("Result"), dict):
            result: dict[str, object] = doc["Result"]
            return result
    from cni_shim.errors import INTERNAL, CniError, RemoteError  # noqa: PLC0415 - failures only

    if status == 400 and isinstance(doc, dict) and doc.get("msg"):
        raise RemoteError(_as_multus_shim(doc, command, stdin))
    raise CniError(
        reasons.DAEMON_PROTOCOL_ERROR,
        f"cni-shim-daemon answered {status} with {payload[:500]!r}; check that the shim and daemon versions match",
        INTERNAL,
    )


# The verbs whose failures Multus's shim wraps with its own context, what kubelet events show
# users (STATUS and GC keep a delegate's error as it is; a DEL error reads as in thin mode, as
# Multus's shim only logs one).
_SHIM_CONTEXT = {"ADD": "CmdAdd", "CHECK": "CmdCheck"}


def _as_multus_shim(doc: dict[str, object], command: str, stdin: bytes) -> dict[str, object]:
    context = _SHIM_CONTEXT.get(command)
    if context is None:
        return doc
    msg = (
        f"{context} (shim): CNI request failed with status 400: '{doc['msg']}\n': "
        f"StdinData: {stdin.decode(errors='replace')}"
    )
    return {**doc, "msg": msg}
