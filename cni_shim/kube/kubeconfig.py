"""Kubeconfig -> connection settings, standard library only.

JSON kubeconfigs (and in-cluster service-account settings) are read on the hot path with no
third-party import. A YAML kubeconfig falls back to a lazy `import yaml`, paid only by such
deployments; write the kubeconfig as JSON to keep the CNI start-up lean.
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Mapping

from cni_shim import reasons
from cni_shim.errors import INVALID_NETWORK_CONFIG, CniError
from sriov_lib import quickjson
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from typing import Any

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class Connection(TypedTuple):
    server: str
    ca_file: str = ""
    ca_data: bytes = b""
    insecure: bool = False
    token: str = ""
    token_file: str = ""
    cert_file: str = ""
    cert_data: bytes = b""
    key_file: str = ""
    key_data: bytes = b""
    tls_server_name: str = ""
    # "exec" or "auth-provider" when the user authenticates through a plugin this module does not
    # run; only the daemon can honour it (through the official library).
    auth_plugin: str = ""


def _bad(path: str, why: str) -> CniError:
    return CniError(
        reasons.INVALID_KUBECONFIG,
        f"GetK8sClient: failed to get context for the kubeconfig {path}: {why}",  # Multus's wording
        INVALID_NETWORK_CONFIG,
    )


def _yaml_problem(exc: Exception) -> str:
    """What is wrong and where, never the text: PyYAML quotes the offending lines, and a
    kubeconfig's lines hold tokens and keys that must not reach a log or a CNI error."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem is None:
        return type(exc).__name__
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def _parse_text(path: str, text: bytes) -> dict[str, Any]:
    try:
        doc: Any = quickjson.loads(text)
    except ValueError:
        try:
            doc = _yaml().safe_load(text)
        except Exception as exc:  # yaml raises many unrelated types for bad input
            raise _bad(path, f"neither JSON nor YAML ({_yaml_problem(exc)})") from exc
    if not isinstance(doc, dict):
        raise _bad(path, "not a mapping")
    return doc


def _yaml() -> Any:
    """PyYAML, also when the fast launcher started Python without site-packages (-S)."""
    try:
        import yaml  # noqa: PLC0415 - only YAML kubeconfigs pay for it
    except ImportError:
        import site  # noqa: PLC0415

        site.main()
        import yaml  # noqa: PLC0415
    return yaml


def _named(doc: Mapping[str, Any], section: str, name: str, path: str) -> dict[str, Any]:
    for item in doc.get(section) or []:
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(section[:-1])
            if isinstance(body, dict):
                return body
    raise _bad(path, f"{section[:-1]} {name!r} not found")


def _data(body: Mapping[str, Any], key: str, path: str) -> bytes:
    value = body.get(key)
    if not value:
        return b""
    try:
        return binascii.a2b_base64(str(value), strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad(path, f"{key} is not base64") from exc


def _relative(base: str, value: Any) -> str:
    if not value:
        return ""
    return str(value) if os.path.isabs(str(value)) else os.path.join(os.path.dirname(base), str(value))


def split_server(server: str) -> tuple[bool, str, int, str]:
    """(https, host, port, path prefix) of an http(s) server URL, read as urllib.parse.urlsplit
    reads it (the host lower-cased, an IPv6 literal without its brackets, the scheme's default
    port for none or 0); ValueError for a port that is not a number in range.

    Spelled out: `urllib.parse` (with the `ipaddress` it imports) costs every thin ADD more than
    the split itself."""
    scheme, _, rest = server.partition("://")
    https = scheme.lower() == "https"
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, path = rest[:end].rpartition("@")[2], rest[end:].split("?", 1)[0].split("#", 1)[0]
    if netloc.startswith("["):
        host, _, after = netloc[1:].partition("]")
        port_text = after[1:] if after.startswith(":") else ""
    else:
        host, _, port_text = netloc.partition(":")
    if port_text and not (port_text.isascii() and port_text.isdigit() and int(port_text) <= 65535):
        raise ValueError(f"port {port_text!r} is not a number from 0 to 65535")
    port = int(port_text) if port_text else 0
    return https, host.lower(), port or (443 if https else 80), path.rstrip("/")


def load(path: str) -> Connection:
    try:
        with open(path, "rb") as fh:
            doc = _parse_text(path, fh.read())
    except OSError as exc:
        op = "stat" if isinstance(exc, FileNotFoundError) else "open"  # as Go's loader words it
        raise _bad(path, f"{op} {path}: {(exc.strerror or str(exc)).lower()}") from exc
    context_name = doc.get("current-context")
    if not context_name:
        raise _bad(path, "current-context is not set")
    context = _named(doc, "contexts", str(context_name), path)
    cluster = _named(doc, "clusters", str(context.get("cluster")), path)
    user = _named(doc, "users", str(context.get("user")), path) if context.get("user") else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        raise _bad(path, f"cluster server {server!r} is not an http(s) URL")
    try:
        split_server(server)
    except ValueError as exc:
        raise _bad(path, f"cluster server {server!r}: {exc}") from exc
    return Connection(
        server=server.rstrip("/"),
        ca_file=_relative(path, cluster.get("certificate-authority")),
        ca_data=_data(cluster, "certificate-authority-data", path),
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=str(cluster.get("tls-server-name") or ""),
        token=str(user.get("token") or ""),
        token_file=_relative(path, user.get("tokenFile")),
        cert_file=_relative(path, user.get("client-certificate")),
        cert_data=_data(user, "client-certificate-data", path),
        key_file=_relative(path, user.get("client-key")),
        key_data=_data(user, "client-key-data", path),
        auth_plugin=next((k for k in ("exec", "auth-provider") if user.get(k)), ""),
    )


def in_cluster(env: Mapping[str, str]) -> Connection | None:
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return None
    host = f"[{host}]" if ":" in host else host
    return Connection(
        server=f"https://{host}:{port}",
        ca_file=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
        token_file=os.path.join(SERVICE_ACCOUNT_DIR, "token"),
    )
