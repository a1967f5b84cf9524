"""The CNI executable protocol (skel semantics): environment checks, verbs, version gates, output.

This is the only place that knows how a request arrives as environment plus stdin bytes and
how a result or error leaves as stdout JSON and an exit status.
"""

from __future__ import annotations

from collections.abc import Mapping

from cni_shim import reasons
from cni_shim.core import versions
from cni_shim.errors import (
    DECODE_FAILURE,
    INCOMPATIBLE_VERSION,
    INVALID_ENVIRONMENT,
    INVALID_NETWORK_CONFIG,
    CniError,
)
from sriov_lib import quickjson
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

COMMANDS = ("ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION")
_ID_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_ID_CHARS = _ID_START | frozenset("_.-")
_REQUIRED = {
    "ADD": ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"),
    "CHECK": ("CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"),
    "DEL": ("CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"),
    "GC": ("CNI_PATH",),
    "STATUS": ("CNI_PATH",),
    "VERSION": (),
}
# Minimum config version that allows the verb (skel's gates).
_MIN_VERSION = {"CHECK": "0.4.0", "GC": "1.1.0", "STATUS": "1.1.0"}
# The container ID names the delegate cache file, so it must fit a file name.
MAX_CONTAINER_ID = 200
_ENV_ORDER = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH")


class Request(TypedTuple):
    """One CNI invocation, independent of how it arrived (process env or a daemon socket)."""

    command: str
    container_id: str
    netns: str
    ifname: str
    args: str
    path: str
    stdin: bytes
    env: Mapping[str, str]

    @classmethod
    def from_env(cls, env: Mapping[str, str], stdin: bytes) -> Request:
        return cls(
            command=env.get("CNI_COMMAND", ""),
            container_id=env.get("CNI_CONTAINERID", ""),
            netns=env.get("CNI_NETNS", ""),
            ifname=env.get("CNI_IFNAME", ""),
            args=env.get("CNI_ARGS", ""),
            path=env.get("CNI_PATH", ""),
            stdin=stdin,
            env=dict(env),
        )


def valid_id(value: str) -> bool:
    r"""libcni's ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$ with Go's `$`: a trailing newline is not allowed.

    Spelled out rather than a regular expression: `re` (and the `enum` it imports) would be a
    thin DEL's heaviest imports."""
    return bool(value) and value[0] in _ID_START and _ID_CHARS.issuperset(value)


def _env_error(message: str, details: str = "") -> CniError:
    return CniError(reasons.INVALID_ENVIRONMENT, message, INVALID_ENVIRONMENT, details)


def validate_ifname(name: str) -> str | None:
    """Linux interface-name rules as libcni enforces them; returns what is wrong, or None."""
    if not name:
        return "interface name is empty"
    if not name.isprintable() or any("\udc80" <= c <= "\udcff" for c in name):
        return "interface name contains non-printable characters or bytes that are not UTF-8"
    if len(name.encode()) > 15:
        return "interface name is too long"
    if name in (".", ".."):
        return "interface name is . or .."
    if any(c in name for c in "/:") or any(c.isspace() for c in name):
        return "interface name contains / or : or whitespace characters"
    return None


def check_environment(req: Request) -> None:
    """Skel's first pass: invalid present values fail at once, missing required ones are collected."""
    if req.command and req.command not in COMMANDS:
        return  # unknown verbs are reported after the config is decoded, as skel does
    required = _REQUIRED.get(req.command, ())
    missing = []
    values = {
        "CNI_COMMAND": req.command,
        "CNI_CONTAINERID": req.container_id,
        "CNI_NETNS": req.netns,
        "CNI_IFNAME": req.ifname,
        "CNI_ARGS": req.args,
        "CNI_PATH": req.path,
    }
    for var in _ENV_ORDER:
        value = values[var]
        if var == "CNI_COMMAND":
            if not value:
                missing.append(var)
            continue
        if var not in required:
            continue
        if not value:
            missing.append(var)
        elif var == "CNI_CONTAINERID" and not valid_id(value):
            raise _env_error("invalid characters in containerID", value[:300])
        elif var == "CNI_CONTAINERID" and len(value) > MAX_CONTAINER_ID:
            raise _env_error(f"containerID is longer than {MAX_CONTAINER_ID} characters", value[:300])
        elif var == "CNI_IFNAME" and (problem := validate_ifname(value)):
            raise _env_error(problem, value[:300])
    if missing:
        raise _env_error(f"required env variables [{','.join(missing)}] missing")


def check_config(command: str, raw: Mapping[str, Any]) -> str:
    """Skel's config checks for a non-VERSION verb; returns the effective config version."""
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise CniError(reasons.MISSING_NETWORK_NAME, "missing network name", INVALID_NETWORK_CONFIG)
    if not valid_id(name):
        raise CniError(
            reasons.INVALID_NETWORK_NAME,
            "invalid characters found in network name",
            INVALID_NETWORK_CONFIG,
            name,
        )
    version = raw.get("cniVersion", "")
    if not isinstance(version, str):
        raise CniError(reasons.INVALID_CNI_VERSION, "cniVersion must be a string", DECODE_FAILURE)
    if command not in COMMANDS:
        raise _env_error(f"unknown CNI_COMMAND: {command}")
    minimum = _MIN_VERSION.get(command)
    if minimum is not None:
        versions.parse(version)
        if not versions.at_least(version, minimum):
            raise CniError(
                reasons.INCOMPATIBLE_CNI_VERSION,
                f"config version does not allow {command}",
                INCOMPATIBLE_VERSION,
                f"config is {version!r}, {command} needs at least {minimum}",
            )
    return versions.require_supported(version)


class Outcome(TypedTuple):
    """What one request came to, before either edge writes it (Multus's `(Result, error)`): the
    ADD's result in the caller's version (None for the other verbs), or the failure with the
    cniVersion its error JSON names (the request config's, as skel does)."""

    result: Mapping[str, Any] | None = None
    error: CniError | None = None
    cni_version: str = ""


def render_result(result: Mapping[str, Any]) -> str:
    return quickjson.dumps(result, indent=4)


def render_error(err: CniError, cni_version: str) -> str:
    return quickjson.dumps(err.to_json(cni_version), indent=4)


def render(outcome: Outcome) -> tuple[int, str]:
    """The executable's exit status and stdout for an outcome."""
    if outcome.error is not None:
        return 1, render_error(outcome.error, outcome.cni_version)
    return 0, render_result(outcome.result) if outcome.result is not None else ""
