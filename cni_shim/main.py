"""The `cni-shim` CNI executable: environment and stdin in, result or error JSON out.

Thin mode runs the core in this process; a config with `daemonSocketDir` forwards the request
to cni-shim-daemon (thick mode, cni_shim.thick_client).

Works under any file name, so it can replace a `multus` binary in place. Only the standard
library and this package are imported, and only what the verb needs: VERSION and the about
line touch nothing but the protocol module.
"""

from __future__ import annotations

import os
import sys

# Spelled out instead of imported: `typing` alone costs milliseconds on every start.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable

    from cni_shim.core import Services


def _cni_version(stdin: bytes) -> str:
    import json  # noqa: PLC0415 - only failures need it

    try:
        value = json.loads(stdin).get("cniVersion", "")
    except (ValueError, AttributeError, RecursionError):
        return ""
    return value if isinstance(value, str) else ""


def _failing(exc: OSError) -> Callable[[], bytes]:
    def read() -> bytes:
        raise exc

    return read


def run(
    env: dict[str, str],
    read_stdin: Callable[[], bytes],
    services: Callable[[dict[str, str]], Services] | None = None,
) -> tuple[int, str, str]:
    """One invocation; returns (exit status, stdout text, stderr text). Never raises.

    `services` replaces the real adapters (tests, thick mode); by default they are built lazily.
    """
    from cni_shim import versions  # noqa: PLC0415

    command = env.get("CNI_COMMAND", "")
    if not command:
        return 0, "", versions.about() + "\n"
    if command == "VERSION":
        return 0, versions.version_json() + "\n", ""
    if services is None:
        # The config decides thick mode, so it is read first. A forwarded request is checked by
        # the daemon exactly as here, and this process stays at the few imports forwarding needs.
        from cni_shim import thick_client  # noqa: PLC0415

        try:
            early = read_stdin()
        except OSError as exc:
            read_stdin = _failing(exc)
        else:
            daemon = thick_client.target(early)
            if daemon is not None:
                return thick_client.run(env, early, daemon)
            read_stdin = lambda: early  # noqa: E731
    from cni_shim import protocol  # noqa: PLC0415
    from cni_shim.errors import IO_FAILURE, CniError  # noqa: PLC0415

    req = protocol.Request.from_env(env, b"")
    stdin = b""
    try:
        protocol.check_environment(req)
        try:
            stdin = read_stdin()
        except OSError as exc:
            raise CniError("StdinUnreadable", f"error reading from stdin: {exc}", IO_FAILURE) from exc
        req = protocol.Request.from_env(env, stdin)
        from cni_shim import core  # noqa: PLC0415

        if services is None:
            from cni_shim import system  # noqa: PLC0415

            services = system.services
        result = core.handle(req, services(env))
    except CniError as err:
        return 1, protocol.render_error(err, _cni_version(stdin)), ""
    except Exception as exc:  # the runtime must get CNI error JSON, never a traceback
        internal = CniError("InternalError", f"cni-shim failed unexpectedly: {type(exc).__name__}: {exc}")
        return 1, protocol.render_error(internal, _cni_version(stdin)), ""
    return 0, protocol.render_result(result) if result is not None else "", ""


def main() -> None:
    status, out, err = run(dict(os.environ), sys.stdin.buffer.read)
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err)
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything the runtime gets is written; the interpreter's teardown (freeing every module
    # and object) would only add a few milliseconds of CPU to each invocation. Log files flush
    # per line and connections need no goodbye, so the process ends here.
    os._exit(status)
