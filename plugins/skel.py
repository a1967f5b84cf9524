"""A tiny stdlib CNI dispatcher for our test plugins, validating input the way Go's pkg/skel does.

Only the standard library is imported here: every plugin start pays for this module.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn

from sriov_contract.errors import ReasonedError

ALL_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

# CNI error codes (SPEC.md "Error"; Go's pkg/types constants).
INCOMPATIBLE_VERSION = 1
UNSUPPORTED_FIELD = 2
UNKNOWN_CONTAINER = 3
INVALID_ENV = 4
IO_FAILURE = 5
DECODING_FAILURE = 6
INVALID_NETWORK_CONFIG = 7
TRY_AGAIN_LATER = 11
INTERNAL = 999

_REASONS = {
    INCOMPATIBLE_VERSION: "CniIncompatibleVersion",
    UNSUPPORTED_FIELD: "CniUnsupportedField",
    UNKNOWN_CONTAINER: "CniUnknownContainer",
    INVALID_ENV: "CniInvalidEnvironment",
    IO_FAILURE: "CniIOFailure",
    DECODING_FAILURE: "CniDecodingFailure",
    INVALID_NETWORK_CONFIG: "CniInvalidNetworkConfig",
    TRY_AGAIN_LATER: "CniTryAgainLater",
}

_ID_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$")
_ENV_ORDER = ("CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH")
# Which variables each verb requires (pkg/skel at v1.3.0).
_REQUIRED = {
    "ADD": {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"},
    "CHECK": {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_PATH"},
    "DEL": {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"},
    "GC": {"CNI_COMMAND", "CNI_PATH"},
    "STATUS": {"CNI_COMMAND", "CNI_PATH"},
    "VERSION": {"CNI_COMMAND"},
}
_MIN_VERSION = {"CHECK": "0.4.0", "GC": "1.1.0", "STATUS": "1.1.0"}


class CniError(ReasonedError):
    """A CNI error result: printed as JSON on stdout with exit status 1."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(_REASONS.get(code, "CniPluginError"), msg, code=code, details=details)
        self.code = code
        self.msg = msg
        self.cni_details = details

    def to_json(self, cni_version: str) -> dict[str, Any]:
        out: dict[str, Any] = {"cniVersion": cni_version, "code": self.code, "msg": self.msg}
        if self.cni_details:
            out["details"] = self.cni_details
        return out


def version_tuple(version: str) -> tuple[int, int, int]:
    """Parse a CNI version; an empty one means 0.1.0 as in libcni."""
    if not version:
        return (0, 1, 0)
    try:
        major, minor, patch = (int(p) for p in version.split("."))
    except ValueError:
        raise CniError(DECODING_FAILURE, f"invalid version {version!r}") from None
    return (major, minor, patch)


@dataclass(frozen=True)
class CmdArgs:
    command: str
    container_id: str
    netns: str
    ifname: str
    args: str
    path: str
    stdin: bytes
    conf: Mapping[str, Any]

    @property
    def cni_version(self) -> str:
        return str(self.conf.get("cniVersion") or "0.1.0")

    def cni_args(self) -> dict[str, str]:
        """CNI_ARGS as a dict (``K=V;K2=V2``); a malformed pair is refused like Go's LoadArgs."""
        pairs: dict[str, str] = {}
        for item in filter(None, self.args.split(";")):
            key, sep, value = item.partition("=")
            if not sep or "=" in value:
                raise CniError(INTERNAL, f"ARGS: invalid pair {item!r}")
            pairs[key] = value
        return pairs


Handler = Callable[[CmdArgs], Mapping[str, Any] | None]


def _check_ifname(name: str) -> None:
    problem = ""
    if not name:
        problem = "interface name is empty"
    elif len(name.encode()) > 15:
        raise CniError(
            INVALID_ENV, "interface name is too long", "interface name should be less than 16 characters"
        )
    elif name in (".", ".."):
        problem = "interface name is . or .."
    elif any(c in name for c in "/:") or any(c.isspace() for c in name):
        problem = "interface name contains / or : or whitespace characters"
    if problem:
        raise CniError(INVALID_ENV, problem, name)


def _validate_env(env: Mapping[str, str]) -> str:
    command = env.get("CNI_COMMAND", "")
    required = _REQUIRED.get(command, {"CNI_COMMAND"})
    missing = []
    for var in _ENV_ORDER:
        value = env.get(var, "")
        if var in required and not value:
            missing.append(var)
        elif var == "CNI_CONTAINERID" and var in required and not _ID_RE.match(value):
            raise CniError(INVALID_ENV, "invalid characters in containerID", value)
        elif var == "CNI_IFNAME" and var in required:
            _check_ifname(value)
    if missing:
        raise CniError(INVALID_ENV, f"required env variables [{','.join(missing)}] missing")
    return command


def _decode_conf(stdin: bytes) -> dict[str, Any]:
    try:
        conf = json.loads(stdin or b"null")
    except ValueError as exc:
        raise CniError(DECODING_FAILURE, f"error unmarshall network config: {exc}") from None
    if not isinstance(conf, dict):
        raise CniError(DECODING_FAILURE, "error unmarshall network config: not a JSON object")
    return conf


def _check_name(conf: Mapping[str, Any]) -> None:
    name = conf.get("name")
    if not name:
        raise CniError(INVALID_NETWORK_CONFIG, "missing network name")
    if not isinstance(name, str) or not _ID_RE.match(name):
        raise CniError(INVALID_NETWORK_CONFIG, "invalid characters found in network name", str(name))


def _check_version(command: str, version: str, supported: Sequence[str]) -> None:
    minimum = _MIN_VERSION.get(command)
    if minimum is None:
        if version not in supported:
            raise CniError(
                INCOMPATIBLE_VERSION,
                "incompatible CNI versions",
                f'config is "{version}", plugin supports {json.dumps(list(supported))}',
            )
        return
    if version_tuple(version) < version_tuple(minimum):
        raise CniError(INCOMPATIBLE_VERSION, f"config version does not allow {command}")
    if max(version_tuple(v) for v in supported) < version_tuple(version):
        raise CniError(INCOMPATIBLE_VERSION, f"plugin version does not allow {command}")


def run(
    handlers: Mapping[str, Handler],
    supported: Sequence[str] = ALL_VERSIONS,
    environ: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
) -> int:
    """Dispatch one CNI invocation; returns the process exit status."""
    env = os.environ if environ is None else environ
    out = sys.stdout if stdout is None else stdout
    version = ""
    try:
        command = _validate_env(env)
        if command == "VERSION":
            out.write(json.dumps({"cniVersion": supported[-1], "supportedVersions": list(supported)}) + "\n")
            return 0
        raw = (sys.stdin.buffer if stdin is None else stdin).read()
        conf = _decode_conf(raw)
        version = str(conf.get("cniVersion") or "")
        _check_name(conf)
        if command not in _REQUIRED:
            raise CniError(INVALID_ENV, f"unknown CNI_COMMAND: {command}")
        _check_version(command, version or "0.1.0", supported)
        handler = handlers.get(command)
        result = None
        if handler is not None:
            args = CmdArgs(
                command,
                env.get("CNI_CONTAINERID", ""),
                env.get("CNI_NETNS", ""),
                env.get("CNI_IFNAME", ""),
                env.get("CNI_ARGS", ""),
                env.get("CNI_PATH", ""),
                raw,
                conf,
            )
            result = handler(args)
    except CniError as exc:
        out.write(json.dumps(exc.to_json(version), indent=4))
        return 1
    except Exception as exc:
        # Go's skel reports every untyped callback error as code 999 with its text.
        out.write(json.dumps(CniError(INTERNAL, str(exc)).to_json(version), indent=4))
        return 1
    if result is not None:
        out.write(json.dumps(result, indent=4))
    return 0


def main(handlers: Mapping[str, Handler], supported: Sequence[str] = ALL_VERSIONS) -> NoReturn:
    sys.exit(run(handlers, supported))
