"""CNI_ARGS: the runtime's Pod identity in, the delegate's K8S_* list out (Multus semantics)."""

from __future__ import annotations

from cni_shim import reasons
from cni_shim.errors import INVALID_ENVIRONMENT, CniError
from sriov_lib.typedtuple import TypedTuple

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from collections.abc import Mapping

_KNOWN = (
    "IgnoreUnknown",
    "IP",
    "K8S_POD_NAME",
    "K8S_POD_NAMESPACE",
    "K8S_POD_INFRA_CONTAINER_ID",
    "K8S_POD_UID",
)
_TRUE = ("1", "true", "True")
_BOOLS = (*_TRUE, "0", "false", "False")

Pairs = tuple[tuple[str, str], ...]


class PodArgs(TypedTuple):
    namespace: str = ""
    name: str = ""
    infra_container_id: str = ""
    uid: str = ""

    @property
    def known(self) -> bool:
        return bool(self.namespace and self.name)

    def label(self) -> str:
        return f"{self.namespace}/{self.name}/{self.uid}"


def _bad(message: str) -> CniError:
    return CniError(
        reasons.INVALID_CNI_ARGS, f"Multus: error getting k8s args: ARGS: {message}", INVALID_ENVIRONMENT
    )


def quote(text: str) -> str:
    """Go's %q for the plain strings CNI_ARGS holds."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def split_pairs(text: str) -> Pairs:
    if not text:
        return ()
    if any("\udc80" <= c <= "\udcff" for c in text):
        raise _bad("CNI_ARGS contains bytes that are not UTF-8")
    pairs = []
    for item in text.split(";"):
        parts = item.split("=")
        if len(parts) != 2:
            raise _bad(f"invalid pair {quote(item)}")
        pairs.append((parts[0], parts[1]))
    return tuple(pairs)


def parse(text: str) -> PodArgs:
    """Strict Multus/libcni parsing: unknown keys fail unless IgnoreUnknown is true."""
    pairs = split_pairs(text)
    values = dict(pairs)
    ignore = values.get("IgnoreUnknown", "")
    if ignore and ignore not in _BOOLS:
        raise _bad(f"IgnoreUnknown must be a boolean, got {ignore!r}")
    unknown = [k for k, _ in pairs if k not in _KNOWN]
    if unknown and ignore not in _TRUE:
        raise _bad(f"unknown args [{' '.join(quote(k) for k in unknown)}]")
    if values.get("IP"):
        import ipaddress  # noqa: PLC0415 - rarely sent; keep it off the start-up path

        try:
            ipaddress.ip_address(values["IP"])
        except ValueError as exc:
            raise _bad(f"IP {values['IP']!r} is not an IP address") from exc
    return PodArgs(
        namespace=values.get("K8S_POD_NAMESPACE", ""),
        name=values.get("K8S_POD_NAME", ""),
        infra_container_id=values.get("K8S_POD_INFRA_CONTAINER_ID", ""),
        uid=values.get("K8S_POD_UID", ""),
    )


def for_delegate(pod: PodArgs, runtime_args: str) -> Pairs:
    """Base K8S_* list, then the runtime's own pairs fill empty values or are appended (Multus order)."""
    base = [
        ["IgnoreUnknown", "true"],
        ["K8S_POD_NAMESPACE", pod.namespace],
        ["K8S_POD_NAME", pod.name],
        ["K8S_POD_INFRA_CONTAINER_ID", pod.infra_container_id],
        ["K8S_POD_UID", pod.uid],
    ]
    for item in runtime_args.split(";") if runtime_args else ():
        key, sep, value = item.partition("=")
        if not sep:
            continue
        slot = next((p for p in base if p[0] == key), None)
        if slot is not None and not slot[1] and value:
            slot[1] = value
        elif slot is None:
            base.append([key, value])
    return tuple((k, v) for k, v in base)


def runtime_pod(env: Mapping[str, str]) -> tuple[str, str]:
    """Multus thick's check of a request's CNI_ARGS before anything runs: every item exactly one
    `=` (keys and values trimmed), K8S_POD_NAMESPACE and K8S_POD_NAME present; their values."""
    if "CNI_ARGS" not in env:
        shown = " ".join(f"{k}:{v}" for k, v in sorted(env.items()))  # Go's map formatting
        raise _runtime(f"missing CNI_ARGS: 'map[{shown}]'")
    values = {}
    for item in env["CNI_ARGS"].split(";"):
        parts = item.split("=")
        if len(parts) != 2:
            raise _runtime(f"invalid CNI_ARG '{item}'")
        values[parts[0].strip()] = parts[1].strip()
    for key in ("K8S_POD_NAMESPACE", "K8S_POD_NAME"):
        if key not in values:
            raise _runtime(f"missing {key}")
    return values["K8S_POD_NAMESPACE"], values["K8S_POD_NAME"]


def _runtime(why: str) -> CniError:
    return CniError(
        reasons.INVALID_CNI_ARGS, f"could not extract the kubernetes runtime args: {why}", INVALID_ENVIRONMENT
    )


def request_label(env: Mapping[str, str]) -> str:
    """Multus thick's printCmdArgs, which leads every failed request's error text."""
    return (
        f"ContainerID:{quote(env.get('CNI_CONTAINERID', ''))} Netns:{quote(env.get('CNI_NETNS', ''))} "
        f'IfName:{quote(env.get("CNI_IFNAME", "eth0"))} Args:{quote(env.get("CNI_ARGS", ""))} Path:""'
    )


def join(pairs: Pairs) -> str:
    return ";".join(f"{k}={v}" for k, v in pairs)
