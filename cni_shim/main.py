"""The `cni-shim` CNI executable: environment and stdin in, result or error JSON out.

Thin mode runs the core in this process; a config with `daemonSocketDir` forwards the request
to cni-shim-daemon (thick mode, cni_shim.thick.forward).

Works under any file name, so it can replace a `multus` binary in place. Only the standard
library and this package are imported, and only what the verb needs: VERSION and the about
line touch nothing but the protocol module.
"""

import gc
import posix
import sys

# Spelled out instead of imported: `typing` alone costs milliseconds on every start.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from collections.abc import Callable

    from cni_shim.handler import Services


def _failing(exc: OSError) -> "Callable[[], bytes]":
    def read() -> bytes:
        raise exc

    return read


def run(
    env: dict[str, str],
    read_stdin: "Callable[[], bytes]",
    services: "Callable[[dict[str, str]], Services] | None" = None,
) -> tuple[int, str, str]:
    """One invocation; returns (exit status, stdout text, stderr text). Never raises.

    `services` replaces the real adapters (tests, thick mode); by default they are built lazily.
    """
    from cni_shim.core import versions  # noqa: PLC0415

    command = env.get("CNI_COMMAND", "")
    if not command:
        return 0, "", versions.about() + "\n"
    if command == "VERSION":
        return 0, versions.version_json() + "\n", ""
    if services is None:
        # The config decides thick mode, so it is read first. A forwarded request is checked by
        # the daemon exactly as here, and this process stays at the few imports forwarding needs.
        from cni_shim.thick import forward  # noqa: PLC0415

        try:
            early = read_stdin()
        except OSError as exc:
            read_stdin = _failing(exc)
        else:
            daemon = forward.target(early)
            if daemon is not None:
                return forward.run(env, early, daemon)
            read_stdin = lambda: early  # noqa: E731
    from cni_shim import handler  # noqa: PLC0415
    from cni_shim.core import protocol  # noqa: PLC0415 - the handler has loaded it already

    status, out = protocol.render(handler.invoke(env, read_stdin, services or _real_services))
    return status, out, ""


def _real_services(env: dict[str, str]) -> "Services":
    from cni_shim.app import thin  # noqa: PLC0415 - adapters only once the request is valid

    return thin.services(env)


def _environ() -> dict[str, str]:
    """os.environ as a dict, decoded as os decodes it, read from `posix` itself: `os` and the
    modules under it cost a thick invocation (which needs nothing else of them) a millisecond."""
    encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    return {k.decode(encoding, errors): v.decode(encoding, errors) for k, v in posix.environ.items()}


def main() -> None:
    # One short invocation that ends in posix._exit: the cyclic collector's passes over the objects
    # each import creates would only add to start-up (about 1 ms a process), never free anything
    # this process would live to reuse.
    gc.disable()
    status, out, err = run(_environ(), sys.stdin.buffer.read)
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err)
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything the runtime gets is written; the interpreter's teardown (freeing every module
    # and object) would only add a few milliseconds of CPU to each invocation. Log files flush
    # per line and connections need no goodbye, so the process ends here.
    posix._exit(status)
